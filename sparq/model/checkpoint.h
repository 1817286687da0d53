#pragma once
// Checkpoints: model parameters (dense buffer, every table), optimizer state
// (Optimizer::state(): row-wise Adagrad accumulators, then the dense
// optimizer's vectors) and a caller-defined metadata string (the
// trainer stores its step, epoch and flags there as JSON). Values are stored
// bit-exactly, so a run resumed from a checkpoint continues with exactly the
// parameters an uninterrupted run has at that step.
//
//   char[8] "SPARQCK1"; u64 meta bytes, meta;
//   u64 n, float[n] dense parameters;
//   u64 tables; per table: u64 rows, u64 dim, float[rows*dim];
//   u64 states; per state: u64 n, float[n]
//
// Written to "<path>.tmp" and renamed, so a crash never leaves half a file
// under the final name.
#include <string>

#include "sparq/model/dlrm.h"
#include "sparq/model/optimizer.h"

namespace sparq {

void save_checkpoint(const std::string& path, const Dlrm<float>& model, Optimizer<float>& opt,
                     const std::string& meta);

// Loads into a model and optimizer built with the same configuration (sizes
// are checked: a mismatch is an InputError naming the file). Returns meta.
std::string load_checkpoint(const std::string& path, Dlrm<float>& model, Optimizer<float>& opt);

// The metadata alone, to check a checkpoint fits before building on it.
std::string read_checkpoint_meta(const std::string& path);

}  // namespace sparq
