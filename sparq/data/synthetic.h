#pragma once
// Synthetic Criteo-like features (labels come from a planted teacher model,
// sparq/model/teacher.h, since this layer knows no model).
//
// Sample i is a pure function of (seed, i): Rng(seed, i) draws it, so any
// range of samples can be generated independently (in parallel, per rank,
// again after a restart) with identical results.
//
//  dense I1..I13: missing with a per-feature probability (Criteo-like, up to
//    77%), else a heavy-tailed count floor(exp(N(mu_f, sigma_f)) - 1/2),
//    clipped at 0; I2 is -1 in 3% of samples (Criteo's I2 has negatives).
//  categorical C1..C26: a Zipf(s) rank k in [0, cardinality_t) (P(k) ~
//    1/(k+1)^s), written as the 32-bit value fmix32(k * 0x9E3779B1 + (t + 1) * 0x85EBCA77),
//    a bijection of k, so distinct ranks are distinct values.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sparq/data/criteo.h"

namespace sparq {

// Criteo-Kaggle-like spread of table sizes (3 .. 100000), capped so that the
// default model (26 x 100000 rows) can hold every value with few collisions.
std::vector<std::size_t> default_synthetic_cardinalities();

struct SyntheticOptions {
  std::uint64_t seed = 1;
  std::vector<std::size_t> cardinalities = default_synthetic_cardinalities();  // 26 entries
  double zipf_exponent = 1.1;
};

struct SyntheticSample {
  std::int64_t ints[kCriteoDense];
  bool present[kCriteoDense];
  std::uint32_t ranks[kCriteoSparse];   // Zipf rank per table (the teacher's row id)
  std::uint32_t values[kCriteoSparse];  // the 32-bit value written to the file
};

class SyntheticFeatures {
 public:
  explicit SyntheticFeatures(const SyntheticOptions& opts);
  void sample(std::uint64_t index, SyntheticSample& s) const;
  // The record a reader would produce from this sample's TSV line.
  static void to_record(const SyntheticSample& s, float label, CriteoRecord& rec);
  const SyntheticOptions& options() const { return opts_; }

 private:
  SyntheticOptions opts_;
  std::vector<std::vector<double>> cdf_;  // per table, cumulative Zipf probabilities
};

}  // namespace sparq
