#pragma once
// Incremental checkpoints written behind training. save() builds the file in
// memory while the caller waits (a copy of the whole model, or of the rows
// changed since the previous point) and writes it on a thread of its own,
// so the next steps run while the disk works: only one write is in flight,
// and the next save() (or wait()) first waits for it and rethrows its error.
//
// A whole checkpoint is written when asked and when there is no previous
// point in this process; otherwise a delta of the previous point
// (checkpoint.h), with the rows Optimizer::take_changed_rows() returns: the
// optimizer must be the one that updated every table of `model` since then.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "sparq/model/dlrm.h"
#include "sparq/model/optimizer.h"

namespace sparq {

class CheckpointWriter {
 public:
  CheckpointWriter() = default;
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;
  ~CheckpointWriter();  // waits for the write in flight; its error is lost (call wait() to see it)

  struct Saved {
    std::string prev;          // the point a delta follows ("" for a whole checkpoint)
    std::size_t bytes = 0;     // the file's size
    std::size_t changed = 0;   // table rows in a delta
    std::size_t rows = 0;      // table rows in the model
  };
  Saved save(const std::string& path, const Dlrm<float>& model, Optimizer<float>& opt, const std::string& meta,
             std::span<const std::vector<std::byte>> rank_states, bool whole);
  // Waits for the write in flight and rethrows its error, if any.
  void wait();

 private:
  std::thread writer_;
  std::exception_ptr error_;
  std::string prev_;  // the last point written ("" before the first)
  std::uint32_t prev_crc_ = 0;
};

}  // namespace sparq
