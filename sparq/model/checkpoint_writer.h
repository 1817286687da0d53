#pragma once
// Incremental checkpoints written behind training. The first save() copies
// the whole model (a snapshot, kept: a whole model's worth of memory); every
// later one copies only the rows changed since the previous point (a delta)
// and returns. A thread of its own, at the lowest priority, writes the
// points in order while the steps go on: a delta as a file of its own, or,
// where a whole checkpoint is asked for, the snapshot brought up to date
// with the delta, so no save copies the whole model again. Points wait in a
// queue while one is written (a whole one takes longer than the steps
// between two saves); a save() finding kQueued waiting waits for room. A
// failed write is rethrown by the next save() or wait(), and the points
// queued after it are dropped (they would follow a point not on disk).
#include <cstddef>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "sparq/model/checkpoint_delta.h"

namespace sparq {

class CheckpointWriter {
 public:
  CheckpointWriter() = default;
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;
  ~CheckpointWriter();  // writes what is queued; an error is lost (call wait() to see it)

  struct Saved {
    std::string prev;         // the point a delta follows ("" for a whole checkpoint)
    std::size_t changed = 0;  // table rows that changed since the previous point
    std::size_t rows = 0;     // table rows in the model
  };
  // The optimizer must have made every update of the model's tables since
  // the previous save (its changed rows are the delta).
  Saved save(const std::string& path, const Dlrm<float>& model, Optimizer<float>& opt, const std::string& meta,
             std::span<const std::vector<std::byte>> rank_states, bool whole);
  // Takes the snapshot's memory now (before training), so that the first
  // save only copies the model: new memory in the step would cost page
  // faults, zeroing and, on huge pages, a compaction stall.
  void reserve(const Dlrm<float>& model);
  // Waits until every point queued is written; rethrows a failed write's error.
  void wait();

  // What was written so far (after wait(): everything saved).
  struct Totals {
    std::size_t wholes = 0, deltas = 0;
    std::uint64_t whole_bytes = 0, delta_bytes = 0;
    double cpu_s = 0;  // the writer thread's CPU time
  };
  Totals totals();

 private:
  struct Job {
    std::string path;
    std::unique_ptr<CheckpointSnapshot> first;   // the first point: the whole model
    std::unique_ptr<CheckpointDelta> delta;       // the others: what changed
    bool whole = false;
  };
  static constexpr std::size_t kQueued = 16;

  void run();  // the writer's thread
  void rethrow_error();
  void write(Job& job);

  std::mutex mutex_;
  std::condition_variable changed_;  // a job queued or done, or stopping
  std::deque<Job> jobs_;             // [0] is being written
  // Deltas written, kept for the next saves: their memory is reused (new
  // memory costs page faults and zeroing in the step).
  std::vector<std::unique_ptr<CheckpointDelta>> spare_;
  std::unique_ptr<CheckpointSnapshot> reserved_;  // reserve()'s, for the first save
  bool stop_ = false, started_ = false;
  std::exception_ptr error_;
  Totals totals_;
  std::thread thread_;
  // The writer's own: the last point written (null before the first and
  // after a failed write), its path and CRC.
  std::unique_ptr<CheckpointSnapshot> snapshot_;
  std::string prev_;
  std::uint32_t prev_crc_ = 0;
  // The caller's: whether a point was queued since the last error, and its path.
  bool based_ = false;
  std::string prev_path_;
};

}  // namespace sparq
