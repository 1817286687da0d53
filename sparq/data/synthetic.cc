#include "sparq/data/synthetic.h"

#include <algorithm>
#include <cmath>

#include "sparq/core/error.h"
#include "sparq/data/hash.h"
#include "sparq/core/rng.h"

namespace sparq {

namespace {
// Per dense feature: probability of an empty field, and log-normal (mu, sigma).
constexpr double kMissing[kCriteoDense] = {0.45, 0.0, 0.21, 0.22, 0.03, 0.22, 0.04, 0.0, 0.04, 0.45, 0.04, 0.77, 0.22};
constexpr double kMu[kCriteoDense] = {0.7, 1.5, 2.0, 1.6, 7.5, 3.5, 1.5, 2.5, 4.0, 0.3, 1.0, 0.5, 2.0};
constexpr double kSigma[kCriteoDense] = {1.0, 2.0, 1.5, 1.0, 2.0, 2.0, 1.5, 1.0, 1.5, 0.7, 1.0, 1.0, 1.2};
}  // namespace

std::vector<std::size_t> default_synthetic_cardinalities() {
  return {1460, 583,   100000, 80000, 305,   24,   12517, 633, 3,     93145, 5683, 100000, 3194,
          27,   14992, 100000, 10,    5652, 2173, 4,     100000, 18,  15,    100000, 105,    40000};
}

SyntheticFeatures::SyntheticFeatures(const SyntheticOptions& opts) : opts_(opts) {
  SPARQ_CHECK_AS(InputError, opts_.cardinalities.size() == kCriteoSparse, "{} cardinalities given, Criteo has {}",
                 opts_.cardinalities.size(), kCriteoSparse);
  SPARQ_CHECK_AS(InputError, opts_.zipf_exponent > 0, "Zipf exponent must be positive");
  for (std::size_t c : opts_.cardinalities) {
    SPARQ_CHECK_AS(InputError, c >= 1 && c <= (std::size_t{1} << 32), "cardinality {} out of range", c);
    std::vector<double> cdf(c);
    double acc = 0;
    for (std::size_t k = 0; k < c; ++k) cdf[k] = (acc += std::pow(static_cast<double>(k + 1), -opts_.zipf_exponent));
    for (auto& v : cdf) v /= acc;
    cdf.back() = 1.0;
    cdf_.push_back(std::move(cdf));
  }
}

void SyntheticFeatures::sample(std::uint64_t index, SyntheticSample& s) const {
  Rng rng(opts_.seed, index);
  for (std::size_t f = 0; f < kCriteoDense; ++f) {
    s.present[f] = rng.uniform() >= kMissing[f];
    const double z = rng.normal();
    double v = std::floor(std::exp(kMu[f] + kSigma[f] * z) - 0.5);
    v = std::clamp(v, 0.0, 2147483647.0);
    s.ints[f] = s.present[f] ? static_cast<std::int64_t>(v) : 0;
  }
  if (s.present[1] && rng.uniform() < 0.03) s.ints[1] = -1;
  for (std::size_t t = 0; t < kCriteoSparse; ++t) {
    const auto& cdf = cdf_[t];
    const double u = rng.uniform();
    const std::size_t k = std::min<std::size_t>(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin(), cdf.size() - 1);
    s.ranks[t] = static_cast<std::uint32_t>(k);
    s.values[t] = fmix32(static_cast<std::uint32_t>(k) * 0x9E3779B1u + static_cast<std::uint32_t>(t + 1) * 0x85EBCA77u);
  }
}

void SyntheticFeatures::to_record(const SyntheticSample& s, float label, CriteoRecord& rec) {
  rec.label = label;
  for (std::size_t f = 0; f < kCriteoDense; ++f) rec.dense[f] = criteo_dense_transform(s.present[f] ? s.ints[f] : 0);
  for (std::size_t t = 0; t < kCriteoSparse; ++t) rec.sparse[t] = s.values[t];
}

}  // namespace sparq
