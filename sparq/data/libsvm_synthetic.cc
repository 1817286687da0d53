#include "sparq/data/libsvm_synthetic.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "sparq/core/error.h"

namespace sparq {

namespace {

// Streams of Rng(seed, .) that no sample index reaches (train samples are
// 0.., test samples 2^40.., pilot samples 2^50..).
constexpr std::uint64_t kPilotBase = std::uint64_t{1} << 50;
constexpr std::uint64_t kPermutationStream = std::uint64_t{1} << 62;
constexpr std::uint64_t kWeightStream = kPermutationStream + 1;
constexpr double kActiveFraction = 0.25;  // features with a teacher weight
constexpr std::size_t kPilotNnz = 10000000;  // pilot size: ~1 s of generation

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

// log1p(x)/x and expm1(x)/x, exact near 0 (where the Zipf exponent is 1).
double log1p_over(double x) {
  return std::abs(x) > 1e-8 ? std::log1p(x) / x : 1 - x * (0.5 - x * (1.0 / 3 - 0.25 * x));
}
double expm1_over(double x) {
  return std::abs(x) > 1e-8 ? std::expm1(x) / x : 1 + x * 0.5 * (1 + x / 3 * (1 + 0.25 * x));
}

// The bias c with mean(sigmoid(a z + c)) = target (increasing in c).
double solve_bias(std::span<const double> z, double a, double target) {
  double lo = -60, hi = 60;
  for (int it = 0; it < 30; ++it) {  // to ~1e-7
    const double c = (lo + hi) / 2;
    double s = 0;
    for (double v : z) s += sigmoid(a * v + c);
    (s / static_cast<double>(z.size()) < target ? lo : hi) = c;
  }
  return (lo + hi) / 2;
}

// The teacher's expected accuracy: mean of max(p, 1 - p).
double expected_accuracy(std::span<const double> z, double a, double c) {
  double s = 0;
  for (double v : z) {
    const double p = sigmoid(a * v + c);
    s += std::max(p, 1 - p);
  }
  return s / static_cast<double>(z.size());
}

const LibsvmSyntheticOptions& checked(const LibsvmSyntheticOptions& o) {
  const LibsvmShape& s = o.shape;
  SPARQ_CHECK_AS(InputError, s.features >= 16 && s.features < (std::size_t{1} << 32),
                 "libsvm shape: {} features, need 16 .. 2^32 - 1", s.features);
  SPARQ_CHECK_AS(InputError, s.mean_nnz >= 1 && s.mean_nnz <= static_cast<double>(s.features) / 4,
                 "libsvm shape: mean non-zeros {} must be in [1, features / 4 = {}]", s.mean_nnz, s.features / 4);
  SPARQ_CHECK_AS(InputError, s.real_features <= s.features / 8, "libsvm shape: {} real-valued features of {}",
                 s.real_features, s.features);
  SPARQ_CHECK_AS(InputError, s.positives > 0 && s.positives < 1, "positive rate must be in (0, 1), got {}",
                 s.positives);
  SPARQ_CHECK_AS(InputError, s.teacher_accuracy > 0.5 && s.teacher_accuracy < 1,
                 "teacher accuracy must be in (0.5, 1), got {}", s.teacher_accuracy);
  SPARQ_CHECK_AS(InputError, s.nnz_sigma >= 0, "libsvm shape: negative nnz spread {}", s.nnz_sigma);
  SPARQ_CHECK_AS(InputError, o.cooccur >= 1 && o.cooccur <= s.mean_nnz,
                 "--cooccur {}: features a group, 1 .. the mean non-zeros a row ({})", o.cooccur, s.mean_nnz);
  return o;
}

}  // namespace

LibsvmShape libsvm_shape(std::string_view like, double scale) {
  SPARQ_CHECK_AS(InputError, scale > 0 && scale <= 1, "scale must be in (0, 1], got {}", scale);
  // Published sizes (docs/data.md); positives, non-zeros and the teachers'
  // accuracies as cited there.
  LibsvmShape s;
  if (like == "url") s = {"url", 2396130, 3231961, 115.6, 0.33, true, 32, 0.3, 0.97};
  else if (like == "webspam") s = {"webspam", 350000, 16609143, 3727.7, 0.61, false, 0, 0.5, 0.985};
  else SPARQ_THROW(InputError, "unknown libsvm shape '{}': expected url or webspam", like);
  const auto scaled = [&](std::size_t n, std::size_t floor) {
    return std::max<std::size_t>(floor, static_cast<std::size_t>(std::llround(static_cast<double>(n) * scale)));
  };
  s.samples = scaled(s.samples, 1);
  s.features = scaled(s.features, 64);
  s.mean_nnz = std::min(s.mean_nnz, static_cast<double>(s.features / 4));
  s.real_features = std::min(s.real_features, s.features / 8);
  return s;
}

ZipfSampler::ZipfSampler(std::size_t n, double s) : n_(static_cast<double>(n)), s_(s) {
  SPARQ_CHECK_AS(InputError, n >= 1 && s > 0, "Zipf over {} values with exponent {}: need n >= 1, s > 0", n, s);
  h_x1_ = h_integral(1.5) - 1;
  h_n_ = h_integral(n_ + 0.5);
  shortcut_ = 2 - h_integral_inverse(h_integral(2.5) - h(2));
}

// Inverts the integral H of the hat function h(x) = x^-s at a uniform point
// of (H(1.5) - 1, H(n + 0.5)]; the rounded x is accepted unless it falls in
// the gap between hat and histogram (rare: ~1 % of draws for s = 1).
std::size_t ZipfSampler::operator()(Rng& rng) const {
  for (;;) {
    const double u = h_n_ + rng.uniform() * (h_x1_ - h_n_);
    const double x = h_integral_inverse(u);
    const double k = std::clamp(std::floor(x + 0.5), 1.0, n_);
    if (k - x <= shortcut_ || u >= h_integral(k + 0.5) - h(k)) return static_cast<std::size_t>(k) - 1;
  }
}

double ZipfSampler::h(double x) const { return std::exp(-s_ * std::log(x)); }

double ZipfSampler::h_integral(double x) const {
  const double lx = std::log(x);
  return expm1_over((1 - s_) * lx) * lx;
}

double ZipfSampler::h_integral_inverse(double x) const {
  const double t = std::max(-1.0, x * (1 - s_));
  return std::exp(log1p_over(t) * x);
}

LibsvmSynthetic::LibsvmSynthetic(const LibsvmSyntheticOptions& opts)
    : opts_(checked(opts)),
      real_(opts.shape.binary_values ? opts.shape.real_features : 0),
      zipf_((opts.shape.features - real_) / std::max<std::size_t>(opts.cooccur, 1), opts.zipf) {
  const std::size_t f = opts_.shape.features, ranks = f - real_;
  rank_to_id_.resize(ranks);
  std::iota(rank_to_id_.begin(), rank_to_id_.end(), static_cast<std::uint32_t>(real_));
  Rng perm(opts_.seed, kPermutationStream);
  for (std::size_t i = ranks; i > 1; --i) std::swap(rank_to_id_[i - 1], rank_to_id_[perm.below(i)]);
  weight_.assign(f, 0.0f);
  Rng w(opts_.seed, kWeightStream);
  for (std::size_t id = 0; id < real_; ++id) weight_[id] = static_cast<float>(w.normal());
  const double r0 = std::max(10.0, static_cast<double>(f) / 1000);
  for (std::size_t r = 0; r < ranks; ++r) {
    const bool active = w.uniform() < kActiveFraction;
    const double g = w.normal();
    if (active) weight_[rank_to_id_[r]] = static_cast<float>(g / std::sqrt(1 + static_cast<double>(r) / r0));
  }
  calibrate();
}

// Appends k distinct Zipf ranks to v, in the order drawn: repeats are
// rejected through an open-addressing set of at least 2k slots (it stays in
// cache, and is cheaper than sorting the draws to find repeats).
void LibsvmSynthetic::draw_ranks(Rng& rng, std::size_t k, std::vector<std::uint32_t>& v) const {
  constexpr std::uint32_t kEmpty = ~std::uint32_t{0};  // no rank: features < 2^32
  int bits = 1;
  while ((std::size_t{1} << bits) < 2 * k) ++bits;
  std::vector<std::uint32_t> set(std::size_t{1} << bits, kEmpty);
  const std::size_t mask = set.size() - 1;
  for (std::size_t have = 0; have < k;) {
    const auto r = static_cast<std::uint32_t>(zipf_(rng));
    std::size_t slot = (r * 0x9E3779B97F4A7C15ULL) >> (64 - bits);
    while (set[slot] != kEmpty && set[slot] != r) slot = (slot + 1) & mask;
    if (set[slot] == r) continue;
    set[slot] = r;
    v.push_back(r);
    ++have;
  }
}

void LibsvmSynthetic::features(Rng& rng, LibsvmRow& row) const {
  const LibsvmShape& s = opts_.shape;
  const double sig = s.nnz_sigma;
  const double drawn = std::round(s.mean_nnz * std::exp(sig * rng.normal() - sig * sig / 2));
  const auto k = static_cast<std::size_t>(std::clamp(drawn, 1.0, static_cast<double>(s.features / 2)));
  row.indices.clear();
  row.values.clear();
  for (std::size_t id = 0; id < real_; ++id)
    if (rng.uniform() < 0.5) {
      row.indices.push_back(static_cast<std::uint32_t>(id));
      row.values.push_back(static_cast<float>(1 + rng.below(1000)) / 1000.0f);
    }
  const std::size_t start = row.indices.size(), group = opts_.cooccur;
  draw_ranks(rng, k > start ? (k - start + group - 1) / group : 0, row.indices);
  // Group ranks -> feature ranks -> ids; the real-valued ids (below real_)
  // stay first, in order.
  const std::size_t groups = row.indices.size() - start;
  row.indices.resize(start + groups * group);
  for (std::size_t i = groups; i-- > 0;) {
    const std::size_t first = static_cast<std::size_t>(row.indices[start + i]) * group;
    for (std::size_t c = group; c-- > 0;) row.indices[start + i * group + c] = rank_to_id_[first + c];
  }
  std::sort(row.indices.begin() + static_cast<std::ptrdiff_t>(start), row.indices.end());
  if (s.binary_values) {
    row.values.resize(row.indices.size(), 1.0f);
    return;
  }
  // Term counts floor(exp(|Z|)) (1 .. ~20, mostly 1-2), scaled to unit L2 norm.
  std::vector<double> counts(row.indices.size());
  double norm = 0;
  for (double& c : counts) {
    c = std::floor(std::exp(std::abs(rng.normal())));
    norm += c * c;
  }
  norm = std::sqrt(norm);
  for (double c : counts) row.values.push_back(static_cast<float>(c / norm));
}

double LibsvmSynthetic::margin(std::span<const std::uint32_t> idx, std::span<const float> val) const {
  double m = 0;
  for (std::size_t i = 0; i < idx.size(); ++i) m += static_cast<double>(weight_[idx[i]]) * val[i];
  return m;
}

void LibsvmSynthetic::sample(std::uint64_t index, LibsvmRow& row) const {
  Rng rng(opts_.seed, index);
  features(rng, row);
  const double z = (margin(row.indices, row.values) - cal_.mean) / cal_.std;
  const double p = sigmoid(cal_.a * z + cal_.c);
  row.probability = static_cast<float>(p);
  row.label = rng.uniform() < p ? 1.0f : -1.0f;
}

void LibsvmSynthetic::generate(std::uint64_t first, std::size_t count, const Callback& f) const {
  LibsvmRow row;
  for (std::size_t i = 0; i < count; ++i) {
    sample(first + i, row);
    f(row.label, row.indices, row.values);
  }
}

// Standardises the margins of a pilot set (samples of their own), then
// bisects the slope a for the target accuracy (solving c for the positive
// rate at each a; the accuracy grows with a).
void LibsvmSynthetic::calibrate() {
  const LibsvmShape& s = opts_.shape;
  const auto n = std::clamp<std::size_t>(static_cast<std::size_t>(kPilotNnz / s.mean_nnz), 2000, 20000);
  std::vector<double> z(n);
  LibsvmRow row;
  double sum = 0, sq = 0;
  for (std::size_t i = 0; i < n; ++i) {
    Rng rng(opts_.seed, kPilotBase + i);
    features(rng, row);
    z[i] = margin(row.indices, row.values);
    sum += z[i];
  }
  cal_.mean = sum / static_cast<double>(n);
  for (double v : z) sq += (v - cal_.mean) * (v - cal_.mean);
  cal_.std = std::sqrt(sq / static_cast<double>(n));
  SPARQ_CHECK_AS(InputError, cal_.std > 0, "libsvm shape {}: the teacher's margin is constant ({} features)", s.name,
                 s.features);
  for (double& v : z) v = (v - cal_.mean) / cal_.std;
  double lo = std::log(1e-3), hi = std::log(1e4);
  for (int it = 0; it < 30; ++it) {  // to a relative ~2e-8
    const double a = std::exp((lo + hi) / 2);
    (expected_accuracy(z, a, solve_bias(z, a, s.positives)) < s.teacher_accuracy ? lo : hi) = (lo + hi) / 2;
  }
  cal_.a = std::exp((lo + hi) / 2);
  cal_.c = solve_bias(z, cal_.a, s.positives);
  cal_.expected_accuracy = expected_accuracy(z, cal_.a, cal_.c);
  double pos = 0;
  for (double v : z) pos += sigmoid(cal_.a * v + cal_.c);
  cal_.positive_rate = pos / static_cast<double>(n);
}

}  // namespace sparq
