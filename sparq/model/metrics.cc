#include "sparq/model/metrics.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "sparq/core/error.h"

namespace sparq {

double roc_auc(std::span<const float> scores, std::span<const float> labels) {
  SPARQ_CHECK(scores.size() == labels.size(), "{} scores for {} labels", scores.size(), labels.size());
  const std::size_t n = scores.size();
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return scores[a] < scores[b]; });
  double pos = 0, rank_sum = 0;  // ranks are 1-based; a tie group gets its mean rank
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    double group_pos = 0;
    while (j < n && scores[order[j]] == scores[order[i]]) group_pos += labels[order[j++]] > 0.5f ? 1 : 0;
    const double mean_rank = 0.5 * static_cast<double>(i + 1 + j);  // mean of i+1 .. j
    rank_sum += group_pos * mean_rank;
    pos += group_pos;
    i = j;
  }
  const double neg = static_cast<double>(n) - pos;
  if (pos == 0 || neg == 0) return 0.5;
  return (rank_sum - pos * (pos + 1) / 2) / (pos * neg);
}

double accuracy(std::span<const float> scores, std::span<const float> labels, float threshold) {
  SPARQ_CHECK(scores.size() == labels.size(), "{} scores for {} labels", scores.size(), labels.size());
  if (scores.empty()) return 0;
  std::size_t ok = 0;
  for (std::size_t i = 0; i < scores.size(); ++i) ok += (scores[i] > threshold) == (labels[i] > 0.5f);
  return static_cast<double>(ok) / static_cast<double>(scores.size());
}

std::size_t correct_predictions(std::span<const float> logits, std::span<const float> labels) {
  SPARQ_CHECK(logits.size() == labels.size(), "{} logits for {} labels", logits.size(), labels.size());
  std::size_t ok = 0;
  for (std::size_t i = 0; i < logits.size(); ++i) ok += (logits[i] > 0.0f) == (labels[i] > 0.5f);
  return ok;
}

}  // namespace sparq
