#pragma once
// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11): the
// output is a pure function of (key, counter), so a value can be computed for
// any (seed, step, tensor, bucket) without generator state. Results therefore
// do not depend on which thread handles which bucket, or in what order.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sparq::compress {

using Philox4x32 = std::array<std::uint32_t, 4>;

// Philox4x32 constants: round multipliers and key increments (Weyl sequence).
inline constexpr std::uint32_t kPhiloxMul0 = 0xD2511F53u, kPhiloxMul1 = 0xCD9E8D57u;
inline constexpr std::uint32_t kPhiloxWeyl0 = 0x9E3779B9u, kPhiloxWeyl1 = 0xBB67AE85u;

// Ten rounds of Philox4x32 on `ctr` under the 64-bit key `key`.
constexpr Philox4x32 philox4x32(Philox4x32 ctr, std::uint64_t key) {
  constexpr std::uint32_t kMul0 = kPhiloxMul0, kMul1 = kPhiloxMul1, kWeyl0 = kPhiloxWeyl0, kWeyl1 = kPhiloxWeyl1;
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = static_cast<std::uint64_t>(kMul0) * ctr[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(kMul1) * ctr[2];
    ctr = {static_cast<std::uint32_t>(p1 >> 32) ^ ctr[1] ^ k0, static_cast<std::uint32_t>(p1),
           static_cast<std::uint32_t>(p0 >> 32) ^ ctr[3] ^ k1, static_cast<std::uint32_t>(p0)};
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return ctr;
}

// Uniform float in [0, 1) from the top 24 bits (every such value is exact).
constexpr float uniform01(std::uint32_t r) { return static_cast<float>(r >> 8) * 0x1p-24f; }

// 4 * blocks uniforms: out[4*b + j] = uniform01(philox4x32(ctr_b, key)[j])
// with ctr_b = ctr except ctr_b[0] = ctr[0] + b (no carry: the caller keeps
// ctr[0] + blocks <= 2^32). Bitwise the same as the scalar calls, but the
// blocks run side by side so the 32x32->64 multiplies vectorize.
void philox_uniforms(Philox4x32 ctr, std::uint64_t key, std::size_t blocks, float* out);

// A stable 64-bit id for a tensor name (FNV-1a), so per-tensor random streams
// survive re-bucketing and restarts: the name, not a position, is the key.
constexpr std::uint64_t tensor_id(std::string_view name) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace sparq::compress
