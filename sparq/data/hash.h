#pragma once
// Categorical value -> embedding row. Criteo's categorical fields are 32-bit
// hex strings (already hashes); the reference either builds dictionaries
// (Kaggle) or takes the value modulo a maximum table size (Terabyte).
// sparq uses no dictionary (one pass, no memory per distinct value):
//
//   row = fmix32(value ^ table_salt(t)) % rows_t
//
// fmix32 is MurmurHash3's 32-bit finaliser (a bijection on 32 bits, full
// avalanche), so values with structure (sequential ids, shared low bits) are
// spread evenly before the modulo; table_salt(t) = 0x9E3779B9 * (t + 1) keeps
// the same value in two tables from colliding in the same pattern. An empty
// field is the value 0 (as the reference's Kaggle loader).
#include <cstdint>

namespace sparq {

constexpr std::uint32_t fmix32(std::uint32_t h) {
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return h;
}

constexpr std::uint32_t table_salt(std::uint32_t table) { return 0x9E3779B9u * (table + 1); }

constexpr std::uint32_t categorical_row(std::uint32_t value, std::uint32_t table, std::uint64_t rows) {
  return static_cast<std::uint32_t>(fmix32(value ^ table_salt(table)) % rows);
}

}  // namespace sparq
