#include "sparq/model/checkpoint_writer.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <utility>

namespace sparq {

CheckpointWriter::~CheckpointWriter() {
  {
    const std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CheckpointWriter::wait() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return jobs_.empty() || error_; });
  rethrow_error();
}

// With the queue locked.
void CheckpointWriter::rethrow_error() {
  if (!error_) return;
  based_ = false;  // the next point is whole, from the model
  std::rethrow_exception(std::exchange(error_, nullptr));
}

CheckpointWriter::Totals CheckpointWriter::totals() {
  const std::lock_guard lock(mutex_);
  return totals_;
}

void CheckpointWriter::reserve(const Dlrm<float>& model) {
  reserved_ = std::make_unique<CheckpointSnapshot>(snapshot_memory(model));
}

CheckpointWriter::Saved CheckpointWriter::save(const std::string& path, const Dlrm<float>& model,
                                               Optimizer<float>& opt, const std::string& meta,
                                               std::span<const std::vector<std::byte>> rank_states, bool whole) {
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return jobs_.size() < kQueued || error_; });
    rethrow_error();
  }
  Saved s{.prev = whole || !based_ ? "" : prev_path_};
  for (const auto& t : model.tables()) s.rows += t.rows();
  Job job{.path = path, .first = nullptr, .delta = nullptr, .whole = whole};
  if (based_) {
    {
      const std::lock_guard lock(mutex_);
      if (!spare_.empty()) job.delta = std::move(spare_.back()), spare_.pop_back();
    }
    if (!job.delta) job.delta = std::make_unique<CheckpointDelta>();
    take_checkpoint_delta(*job.delta, model, opt, meta, rank_states);
    for (const auto& t : job.delta->tables) s.changed += t.ids.size();
  } else {
    for (std::size_t t = 0; t < model.tables().size(); ++t) s.changed += opt.take_changed_rows(t).size();
    job.first = reserved_ ? std::move(reserved_) : std::make_unique<CheckpointSnapshot>();
    take_snapshot(*job.first, model, opt, meta, rank_states);
  }
  based_ = true;
  prev_path_ = path;
  {
    const std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(job));
    if (!started_) thread_ = std::thread([this] { run(); }), started_ = true;
  }
  changed_.notify_all();
  return s;
}

void CheckpointWriter::run() {
  // Behind the training threads: the writes take the CPU they leave.
  const sched_param idle{};
  pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle);
  pthread_setname_np(pthread_self(), "sparq-ckpt");
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return !jobs_.empty() || stop_; });
    if (jobs_.empty()) return;  // stopping, with nothing left to write
    Job& job = jobs_.front();
    lock.unlock();
    timespec t0{}, t1{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    std::exception_ptr error;
    try {
      write(job);
    } catch (...) {
      error = std::current_exception();
      snapshot_.reset();
    }
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    lock.lock();
    totals_.cpu_s += static_cast<double>(t1.tv_sec - t0.tv_sec) + 1e-9 * static_cast<double>(t1.tv_nsec - t0.tv_nsec);
    if (error) {
      error_ = error;
      jobs_.clear();  // they follow the point that failed
    } else {
      if (job.delta) spare_.push_back(std::move(job.delta));
      jobs_.pop_front();
    }
    changed_.notify_all();
  }
}

// On the writer's thread, the queue unlocked (the job stays at its front).
void CheckpointWriter::write(Job& job) {
  const bool whole = !job.delta || job.whole;
  if (job.first) snapshot_ = std::move(job.first);
  else if (whole)
    advance(*snapshot_, *job.delta);
  ckpt::Written w;
  if (whole) {
    w = save_checkpoint(job.path, *snapshot_);
  } else {
    w = save_delta(job.path, prev_, prev_crc_, *job.delta);
    advance(*snapshot_, *job.delta);  // after the write: it takes the delta's dense part
  }
  prev_ = job.path, prev_crc_ = w.crc;
  const std::lock_guard lock(mutex_);
  if (whole)
    ++totals_.wholes, totals_.whole_bytes += w.bytes;
  else
    ++totals_.deltas, totals_.delta_bytes += w.bytes;
}

}  // namespace sparq
