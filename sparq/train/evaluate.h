#pragma once
// Test metrics of a model on a record set: loss, accuracy, AUC, NE.
#include <functional>
#include <optional>
#include <vector>

#include "sparq/data/dataset.h"
#include "sparq/model/dlrm.h"

namespace sparq {

struct EvalResult {
  double loss = 0, accuracy = 0, auc = 0.5;
  double positive_rate = 0;  // the test set's base CTR p
  // Normalized entropy: loss / -(p log p + (1-p) log(1-p)), the loss against
  // always predicting p; NaN when the test set has one class only.
  double ne() const;
};

// Test metrics over `test`; logits_of(batch) gives the logits, or nothing on
// a rank that does not see them (model parallelism: all but the last stage),
// which then returns nothing.
std::optional<EvalResult> evaluate(const std::function<std::vector<float>(const Batch&)>& logits_of,
                                   const RecordSet& test, const DlrmConfig& cfg, std::size_t batch);

// The same for a model that holds every parameter (one rank tests it).
std::optional<EvalResult> evaluate(Dlrm<float>& model, const RecordSet& test, std::size_t batch);

}  // namespace sparq
