#include "sparq/train/evaluate.h"

#include <cmath>
#include <limits>
#include <numeric>

#include "sparq/model/loss.h"
#include "sparq/model/metrics.h"

namespace sparq {

std::optional<EvalResult> evaluate(const std::function<std::vector<float>(const Batch&)>& logits_of,
                                   const RecordSet& test, const DlrmConfig& cfg, std::size_t batch) {
  BatchPlan plan(test.size(), {.batch = batch, .shuffle = false});
  std::vector<float> scores, labels;
  scores.reserve(test.size());
  labels.reserve(test.size());
  Batch b;
  double loss_sum = 0;
  for (std::size_t i = 0; i < plan.num_batches(); ++i) {
    plan.fill(i, test.records(), cfg.table_rows, b);
    const std::vector<float> z = logits_of(b);
    if (z.empty() && b.size > 0) continue;
    loss_sum += bce_with_logits<float>(std::span<const float>(z), b.labels, {}) * static_cast<double>(b.size);
    for (std::size_t k = 0; k < b.size; ++k) {
      scores.push_back(sigmoid(z[k]));
      labels.push_back(b.labels[k]);
    }
  }
  if (scores.empty()) return std::nullopt;
  EvalResult r;
  r.loss = loss_sum / static_cast<double>(scores.size());
  r.accuracy = accuracy(scores, labels);
  r.auc = roc_auc(scores, labels);
  r.positive_rate = std::accumulate(labels.begin(), labels.end(), 0.0) / static_cast<double>(labels.size());
  return r;
}

std::optional<EvalResult> evaluate(Dlrm<float>& model, const RecordSet& test, std::size_t batch) {
  return evaluate(
      [&](const Batch& b) {
        const auto z = model.forward(b);
        return std::vector<float>(z.begin(), z.end());
      },
      test, model.config(), batch);
}

double EvalResult::ne() const {
  const double p = positive_rate;
  if (p <= 0 || p >= 1) return std::numeric_limits<double>::quiet_NaN();
  return loss / -(p * std::log(p) + (1 - p) * std::log(1 - p));
}

}  // namespace sparq
