#pragma once
// Checkpoints: model parameters (dense buffer, every table), optimizer state
// (Optimizer::state(): row-wise Adagrad accumulators, then the dense
// optimizer's vectors), each rank's codec state (error-feedback residuals, DCT thresholds and their
// schedule, as saved by the trainer's plan) and a metadata JSON string (the
// trainer stores the step, the flags and the model configuration there).
// Values are stored bit-exactly, so a run resumed from a checkpoint continues
// with exactly the state an uninterrupted run has at that step.
//
//   char[8] "SPARQCK4"; u64 meta bytes, meta;
//   u64 n, float[n] dense parameters;
//   u64 tables; per table: u64 rows, u64 dim, float[rows*dim];
//   u64 states; per state: u64 n, float[n]
//   u64 ranks; per rank: u64 n, byte[n]          (codec state)
//   u32 CRC-32 (zlib) of every byte before it
//
// Readers check the CRC over the whole file before parsing anything, so a
// truncated or bit-flipped file is an InputError naming it, never a model
// loaded from damaged bytes (read_checkpoint_meta reads the file whole for
// that too). "SPARQCK2" (the same without the CRC) and "SPARQCK1" (no codec
// section either) still load, unchecked: they were written before the CRC,
// and refusing them would strand every run saved so far.
//
// Saving writes "<path>.tmp", fsyncs it, renames it over <path> and fsyncs
// the directory: a crash, a kill or a full disk at any moment leaves either
// the previous checkpoint or the new one under <path>, whole.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sparq/model/dlrm.h"
#include "sparq/model/optimizer.h"

namespace sparq {

void save_checkpoint(const std::string& path, const Dlrm<float>& model, Optimizer<float>& opt, const std::string& meta,
                     std::span<const std::vector<std::byte>> rank_states = {});

// Loads into a model (and optimizer, unless null) built with the same
// configuration (sizes are checked: a mismatch is an InputError naming the
// file). Fills `rank_states` (when given) with the codec states. Returns meta.
std::string load_checkpoint(const std::string& path, Dlrm<float>& model, Optimizer<float>* opt,
                            std::vector<std::vector<std::byte>>* rank_states = nullptr);

// A linear model (sparq/model/linear.h) in the same layout, checked the same
// way: its weights as the dense parameters, no tables, no optimizer state.
void save_weights_checkpoint(const std::string& path, std::span<const float> weights, const std::string& meta);
// Fills `weights` (resized to the file's count) and returns meta; a
// checkpoint with tables or optimizer state is an InputError.
std::string load_weights_checkpoint(const std::string& path, std::vector<float>& weights);

// Incremental checkpoints. A delta holds the dense parameters, the dense
// optimizer's state and the codec states whole, and of each table only the
// rows changed since the point it follows (a whole checkpoint or another
// delta), with their row-wise optimizer state:
//
//   char[8] "SPARQDL1"; u64 n, char[n] the point it follows (a path
//   relative to the delta's folder); u32 that file's CRC; u64 meta bytes, meta;
//   u64 n, float[n] dense parameters;
//   u64 tables; per table: u64 rows, u64 dim, u64 k, u32[k] the changed rows
//     (ascending), float[k*dim] their values;
//   u64 states; per state: u64 n, float[n] (a table's: its k rows'; the dense
//     optimizer's: whole)
//   u64 ranks; per rank: u64 n, byte[n]          (codec state)
//   u32 CRC-32 (zlib) of every byte before it
//
// load_checkpoint() of a delta loads its chain: the whole checkpoint, then
// every delta in turn; the CRC a delta keeps of the point it follows pins
// that file, so a link written again by another run is refused, not mixed in.

// Writing deltas, and the snapshots that make whole checkpoints while
// training goes on: checkpoint_delta.h.

// The files that loading `path` reads, newest first: `path`, then for a
// delta the point it follows, and so on to a whole checkpoint. Every file is
// read whole (CRC checked) and must be the one its successor was written
// after; a missing or replaced link is an InputError naming it.
std::vector<std::string> checkpoint_chain(const std::string& path);

// The metadata alone (for tools that need the configuration first).
std::string read_checkpoint_meta(const std::string& path);

// The model configuration as the trainer stores it under meta's "config",
// by train's flag names ({"arch_mlp_bot": "13-512-256-64-16", ...}), and
// back; `path` names the file in errors.
nlohmann::json checkpoint_config_json(const DlrmConfig& cfg);
DlrmConfig checkpoint_config(const std::string& meta, const std::string& path);

}  // namespace sparq
