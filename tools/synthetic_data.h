#pragma once
// Helpers shared by `sparq gen-data` and `sparq train --data-generation
// synthetic`: flags -> generator options, and the teacher's scores.
#include <fmt/format.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sparq/core/error.h"
#include "sparq/data/synthetic.h"
#include "sparq/model/dlrm.h"
#include "sparq/model/loss.h"
#include "sparq/model/metrics.h"

namespace sparq::cli {

inline std::vector<std::size_t> per_table(const std::string& s, const char* flag) {
  auto v = parse_dash_list(s);
  if (v.size() == 1) v.assign(kCriteoSparse, v[0]);
  SPARQ_CHECK_AS(InputError, v.size() == kCriteoSparse, "{} needs one value or {} (Criteo has {} categorical features), got {}",
                 flag, kCriteoSparse, kCriteoSparse, v.size());
  return v;
}

inline SyntheticOptions synthetic_options(std::uint64_t seed, double zipf, const std::string& cardinalities) {
  SyntheticOptions so;
  so.seed = seed;
  so.zipf_exponent = zipf;
  if (!cardinalities.empty()) so.cardinalities = per_table(cardinalities, "--cardinalities");
  return so;
}

struct TeacherScore {
  double loss = 0, accuracy = 0, auc = 0.5, positives = 0;
};

// Scores probabilities p against labels y: BCE from the logit of p.
inline TeacherScore score_teacher(std::span<const float> p, std::span<const float> y) {
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

}  // namespace sparq::cli
