#include "sparq/model/teacher.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <thread>

#include "sparq/core/error.h"
#include "sparq/core/rng.h"
#include "sparq/model/loss.h"
#include "sparq/model/metrics.h"

namespace sparq {

namespace {

constexpr std::uint64_t kPilotBase = std::uint64_t{1} << 50;
constexpr std::uint64_t kLabelStream = 0x1abe1;

double sig(double x) { return sigmoid<double>(x); }

// E[AUC] of scores s against labels ~ Bernoulli(p): pairs (i, j), i != j,
// weighted p_i (1 - p_j), counting s_i > s_j as 1 and ties as 1/2.
double expected_auc(const std::vector<double>& s, const std::vector<double>& p) {
  std::vector<std::size_t> order(s.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](auto x, auto y) { return s[x] < s[y]; });
  double neg_below = 0, num = 0, P = 0, N = 0, self = 0;
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    double gp = 0, gn = 0;
    while (j < order.size() && s[order[j]] == s[order[i]]) {
      gp += p[order[j]];
      gn += 1 - p[order[j]];
      self += p[order[j]] * (1 - p[order[j]]);
      ++j;
    }
    num += gp * neg_below + 0.5 * (gp * gn);  // ties within the group count half (incl. self pairs, removed below)
    neg_below += gn;
    P += gp;
    N += gn;
    i = j;
  }
  num -= 0.5 * self;
  return num / (P * N - self);
}

}  // namespace

Teacher::~Teacher() = default;

Teacher::Teacher(const TeacherOptions& opts, const SyntheticOptions& features) : opts_(opts), features_(features) {
  DlrmConfig cfg;
  cfg.bot_mlp = opts_.bot_mlp;
  cfg.top_mlp = opts_.top_mlp;
  cfg.emb_dim = opts_.emb_dim;
  cfg.table_rows = features.cardinalities;
  model_ = std::make_unique<Dlrm<float>>(cfg, opts_.seed ^ 0x7eac4e5ULL);
  Rng rng(opts_.seed, 0xe3b);
  for (auto& t : model_->tables())
    for (std::size_t k = 0; k < t.rows(); ++k) {
      const double scale = opts_.rare_scale > 0 ? 1.0 / std::sqrt(1.0 + static_cast<double>(k) / opts_.rare_scale) : 1.0;
      for (auto& w : t.row(k)) w = static_cast<float>(rng.normal(0.0, opts_.emb_std * scale));
    }

  // Calibrate on a pilot set.
  std::vector<SyntheticSample> pilot(opts_.pilot);
  for (std::size_t i = 0; i < pilot.size(); ++i) features_.sample(kPilotBase + i, pilot[i]);
  std::vector<float> z;
  logits(pilot, z);
  double m = 0, v = 0;
  for (float x : z) m += x;
  m /= static_cast<double>(z.size());
  for (float x : z) v += (x - m) * (x - m);
  const double sd = std::sqrt(v / static_cast<double>(z.size()));
  SPARQ_CHECK(sd > 0, "teacher output is constant on the pilot set (degenerate random teacher)");
  cal_.mean = m;
  cal_.std = sd;
  std::vector<double> s(z.size()), p(z.size());
  for (std::size_t i = 0; i < z.size(); ++i) s[i] = (z[i] - m) / sd;
  auto fit_c = [&](double a) {
    double lo = -30, hi = 30;
    for (int it = 0; it < 60; ++it) {
      const double c = 0.5 * (lo + hi);
      double mean = 0;
      for (double x : s) mean += sig(a * x + c);
      mean /= static_cast<double>(s.size());
      (mean < opts_.target_positive ? lo : hi) = c;
    }
    return 0.5 * (lo + hi);
  };
  auto auc_of = [&](double a, double c) {
    for (std::size_t i = 0; i < s.size(); ++i) p[i] = sig(a * s[i] + c);
    return expected_auc(s, p);
  };
  double lo = 1e-3, hi = 50;
  for (int it = 0; it < 40; ++it) {
    const double a = std::sqrt(lo * hi);  // geometric bisection: a spans decades
    (auc_of(a, fit_c(a)) < opts_.target_auc ? lo : hi) = a;
  }
  cal_.a = std::sqrt(lo * hi);
  cal_.c = fit_c(cal_.a);
  cal_.expected_auc = auc_of(cal_.a, cal_.c);
  cal_.positive_rate = std::accumulate(p.begin(), p.end(), 0.0) / static_cast<double>(p.size());
}

void Teacher::logits(const std::vector<SyntheticSample>& s, std::vector<float>& z) {
  z.resize(s.size());
  const std::size_t chunk = 4096;
  for (std::size_t first = 0; first < s.size(); first += chunk) {
    const std::size_t B = std::min(chunk, s.size() - first);
    if (batch_.size != B) batch_.reset_one_hot(B, kCriteoDense, kCriteoSparse);
    for (std::size_t k = 0; k < B; ++k) {
      const SyntheticSample& x = s[first + k];
      for (std::size_t f = 0; f < kCriteoDense; ++f)
        batch_.dense[k * kCriteoDense + f] = criteo_dense_transform(x.present[f] ? x.ints[f] : 0);
      for (std::size_t t = 0; t < kCriteoSparse; ++t) batch_.sparse[t].indices[k] = x.ranks[t];
    }
    const auto out = model_->forward(batch_);
    std::copy(out.begin(), out.end(), z.begin() + static_cast<std::ptrdiff_t>(first));
  }
}

void Teacher::generate(std::uint64_t first, std::size_t count, const Take& take, int threads) {
  const std::size_t chunk = 1 << 16;
  std::vector<SyntheticSample> s;
  std::vector<float> z;
  threads = std::max(1, threads);
  for (std::size_t done = 0; done < count; done += chunk) {
    const std::size_t n = std::min(chunk, count - done);
    s.resize(n);
    std::vector<std::thread> pool;
    for (int w = 0; w < threads; ++w)
      pool.emplace_back([&, w] {
        for (std::size_t i = static_cast<std::size_t>(w); i < n; i += static_cast<std::size_t>(threads))
          features_.sample(first + done + i, s[i]);
      });
    for (auto& t : pool) t.join();
    logits(s, z);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t idx = first + done + i;
      const double p = sig(cal_.a * (z[i] - cal_.mean) / cal_.std + cal_.c);
      Rng rng(opts_.seed ^ kLabelStream, idx);
      take(s[i], rng.uniform() < p ? 1.0f : 0.0f, static_cast<float>(p));
    }
  }
}

void Teacher::generate(std::uint64_t first, std::size_t count, std::vector<CriteoRecord>& records,
                       std::vector<float>* probs, int threads) {
  generate(
      first, count,
      [&](const SyntheticSample& s, float label, float p) {
        SyntheticFeatures::to_record(s, label, records.emplace_back());
        if (probs) probs->push_back(p);
      },
      threads);
}

TeacherScore score_teacher(std::span<const float> p, std::span<const float> y) {
  TeacherScore s;
  std::vector<double> z(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double q = std::clamp(static_cast<double>(p[i]), 1e-12, 1 - 1e-12);
    z[i] = std::log(q / (1 - q));
  }
  s.loss = bce_with_logits<double>(z, y, {});
  s.accuracy = accuracy(p, y);
  s.auc = roc_auc(p, y);
  for (float v : y) s.positives += v;
  s.positives /= std::max<std::size_t>(1, y.size());
  return s;
}

}  // namespace sparq
