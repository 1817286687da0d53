#pragma once
// Evaluation metrics over a whole test set.
#include <cstddef>
#include <span>

namespace sparq {

// Exact ROC AUC: the probability that a random positive scores above a random
// negative, ties counting one half. Sort-based (O(n log n)): rank all scores,
// give tied scores their average rank, AUC = (sum of positive ranks -
// P(P+1)/2) / (P N). Returns 0.5 when there are no positives or negatives.
double roc_auc(std::span<const float> scores, std::span<const float> labels);

// Fraction of samples whose rounded prediction (score > threshold) equals the
// label.
double accuracy(std::span<const float> scores, std::span<const float> labels, float threshold = 0.5f);

}  // namespace sparq
