#pragma once
// Incremental checkpoints (the delta layout is in checkpoint.h). What the
// training thread copies out of the model at a save: the whole state once
// (a snapshot), then what changed since the previous point (a delta). A
// writer of its own (checkpoint_writer.h) writes them while training goes
// on, and keeps the snapshot up to date with every delta, so it can write a
// whole checkpoint at any point without the model.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sparq/core/huge_pages.h"
#include "sparq/model/checkpoint_io.h"
#include "sparq/model/dlrm.h"
#include "sparq/model/optimizer.h"

namespace sparq {

// A whole model's checkpointed state, apart from the model.
struct CheckpointSnapshot {
  struct Table {
    std::uint64_t rows = 0, dim = 0;
    // On huge pages where the system has them: every delta scatters its
    // rows here at random (as the optimizer's updates do into the model).
    RandomAccessArray<float> values;
    std::span<const float> weights() const { return {values.get(), rows * dim}; }
  };
  std::vector<float> dense;
  std::vector<Table> tables;
  std::vector<std::vector<float>> states;  // the optimizer's, in checkpoint order (Optimizer::state())
  std::size_t table_states = 0;            // the first ones: a value per row of table i
  std::vector<std::vector<std::byte>> rank_states;
  std::string meta;
};

// The rows that changed since the previous point, with their values and
// row-wise optimizer state; the dense part and the codec states whole.
struct CheckpointDelta {
  struct Rows {
    std::uint64_t rows = 0, dim = 0;  // the table's
    std::vector<std::uint32_t> ids;   // ascending
    std::vector<float> values;       // ids x dim
    std::vector<float> state;        // a value per id (row-wise optimizer state; none without)
  };
  std::vector<float> dense;
  std::vector<Rows> tables;
  bool row_state = false;  // whether the optimizer keeps a value per table row
  std::vector<std::vector<float>> dense_states;
  std::vector<std::vector<std::byte>> rank_states;
  std::string meta;
};

// The memory of a snapshot of `model`'s tables, taken and touched ahead
// (before training): the first save then only copies into it.
CheckpointSnapshot snapshot_memory(const Dlrm<float>& model);
// Copies of every held table (all must be: gather them first) into `s`,
// whose tables' memory is reused where it fits.
void take_snapshot(CheckpointSnapshot& s, const Dlrm<float>& model, Optimizer<float>& opt, const std::string& meta,
                   std::span<const std::vector<std::byte>> rank_states);
// What changed since the previous point, into `d` (its memory reused): the
// rows the optimizer changed (Optimizer::take_changed_rows, taken here).
void take_checkpoint_delta(CheckpointDelta& d, const Dlrm<float>& model, Optimizer<float>& opt,
                           const std::string& meta, std::span<const std::vector<std::byte>> rank_states);
// `snapshot` moved on to the point after `delta`, which gives up its dense
// part, optimizer dense state, codec states and metadata (write it first).
void advance(CheckpointSnapshot& snapshot, CheckpointDelta& delta);

// Written as save_checkpoint() writes (atomic, durable, CRC-checked); they
// return the file's CRC and size. A delta names `prev`, the point it follows
// (whose CRC is `prev_crc`), relative to its own folder.
ckpt::Written save_checkpoint(const std::string& path, const CheckpointSnapshot& snapshot);
ckpt::Written save_delta(const std::string& path, const std::string& prev, std::uint32_t prev_crc,
                         const CheckpointDelta& delta);

}  // namespace sparq

namespace sparq::ckpt {

// load_checkpoint()'s step for each delta of a chain: applies the delta at
// `path` to a model (and optimizer, unless null) that holds the point it
// follows; fills `rank_states` (unless null) with its codec states. Returns
// its metadata.
std::string load_delta(const std::string& path, Dlrm<float>& model, Optimizer<float>* opt,
                       std::vector<std::vector<std::byte>>* rank_states);

}  // namespace sparq::ckpt
