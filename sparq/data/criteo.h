#pragma once
// The Criteo click-log format (Kaggle display-advertising and Terabyte):
// one sample per line, 40 tab-separated fields
//   label  I1..I13  C1..C26
// label "0"/"1"; I* decimal integers (may be negative, may be empty);
// C* 32-bit values as hex strings of up to 8 digits (may be empty).
//
// Parsing applies the reference's transforms right away, so every later
// stage (binary file, batches) sees model-ready values:
//   dense  = log(1 + max(x, 0))   (empty -> 0)
//   sparse = the 32-bit value     (empty -> 0); reduced to a table's size
//            only when a batch is built (hash.h), so one file serves any
//            table sizes.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sparq {

constexpr std::size_t kCriteoDense = 13;
constexpr std::size_t kCriteoSparse = 26;
constexpr std::size_t kCriteoFields = 1 + kCriteoDense + kCriteoSparse;

// One sample, exactly as stored in the binary format (160 bytes).
struct CriteoRecord {
  float label;
  float dense[kCriteoDense];
  std::uint32_t sparse[kCriteoSparse];
};
static_assert(sizeof(CriteoRecord) == 160);

// Parses one line (without its '\n'; a trailing '\r' is tolerated). On a
// malformed line returns false and sets `why` (wrong field count, label not
// 0/1, non-numeric or overflowing integer, bad or too long hex).
bool parse_criteo_line(std::string_view line, CriteoRecord& out, std::string& why);

// Appends the line for a record whose dense values are raw counts (used by
// the synthetic generator, which knows the integers it drew).
void format_criteo_line(float label, const std::int64_t* ints, const bool* int_present,
                        const std::uint32_t* cats, std::string& out);

inline float criteo_dense_transform(std::int64_t x) {
  return static_cast<float>(std::log1p(static_cast<double>(x > 0 ? x : 0)));
}

}  // namespace sparq
