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

// Training batches: how many logits predict their label (logit > 0 is a
// click, the same as probability > 0.5), for the training accuracy.
std::size_t correct_predictions(std::span<const float> logits, std::span<const float> labels);

}  // namespace sparq
