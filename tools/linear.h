#pragma once
// What `sparq linear` and `sparq predict` share for linear models.
#include <span>
#include <string>

#include "sparq/data/libsvm.h"
#include "sparq/model/linear.h"
#include "sparq/transport/transport.h"

namespace sparq::cli {

// Rank 0 prints the skipped lines and dropped entries summed over the ranks.
void report_bad_lines(Transport& t, const std::string& path, const LibsvmRead& r);
// Appends feature num_features with value 1 to every row (liblinear's -B 1).
void append_constant_feature(SparseRows& r);
// Loads a `sparq linear --save` model whose size m already has.
void load_model(const std::string& path, LinearModel& m);
// Whether a checkpoint's metadata is a linear model's.
bool is_linear_model(const std::string& meta);
// `sparq predict` for a linear model: a score a line (the probability for
// the logistic loss, the margin for the hinge), and the metrics.
void predict_linear(const std::string& load, const std::string& data_path, const std::string& out);
// One score a line, written atomically.
void write_scores(const std::string& path, std::span<const float> scores);

}  // namespace sparq::cli
