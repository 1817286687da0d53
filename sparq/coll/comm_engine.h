#pragma once
// Non-blocking collectives: a communication thread that owns a transport.
//
// Collectives submitted from any thread run on the engine's thread one at a
// time, in submission order (every rank must submit the same collectives in
// the same order, as with MPI's non-blocking collectives). The caller keeps
// computing and later waits on the returned Work. While an engine exists,
// nothing else may use its transport: that is what lets MpiTransport run at
// MPI_THREAD_SERIALIZED.
//
// If a collective fails, the transport's state is unknown, so every later
// one fails at once with that error instead of mismatching messages.
//
// On a virtual clock (SimTransport) the engine's thread is a timeline of its
// own: a job starts no earlier than its submitter's clock at submit(), and
// Work::wait() moves the waiter's clock to the job's end, so communication
// overlaps computation in modelled time as it does in real time.
//
// Priority: the thread can run at a raised priority (a lower nice value).
// It needs little CPU but sits on every rank's critical path: where ranks
// share cores (the emulated cluster; a host with more threads than cores) a
// message that arrives while its receiver's thread waits for a core delays
// every rank behind it.
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>

#include "sparq/coll/allreduce.h"
#include "sparq/coll/alltoall.h"
#include "sparq/coll/quantized.h"
#include "sparq/coll/sparse_allreduce.h"

namespace sparq {

// A handle to a submitted collective.
class Work {
 public:
  Work() = default;
  Work(std::shared_future<CollStats> f, Transport& t) : f_(std::move(f)), t_(&t) {}
  // True once the collective finished (successfully or not).
  bool test() const;
  // Blocks until finished; returns its stats or rethrows its error. On a
  // virtual clock the waiting thread's clock moves to the job's end.
  CollStats wait() const;

 private:
  std::shared_future<CollStats> f_;
  Transport* t_ = nullptr;
};

class CommEngine {
 public:
  // nice < 0 raises the thread's priority by that much (0 leaves it). Where
  // that is not permitted (it needs CAP_SYS_NICE or a high enough
  // RLIMIT_NICE), the thread runs at its default priority and
  // priority_note() says why.
  explicit CommEngine(Transport& t, int nice = 0);
  // Runs what is queued, then stops the thread.
  ~CommEngine();
  CommEngine(const CommEngine&) = delete;
  CommEngine& operator=(const CommEngine&) = delete;

  using Job = std::function<CollStats(Transport&)>;
  Work submit(Job job);
  int rank() const { return rank_; }
  int size() const { return size_; }
  // Empty when the requested priority was set.
  const std::string& priority_note() const { return priority_note_; }

 private:
  void loop();
  Transport& t_;
  int rank_, size_;
  std::mutex mu_;
  std::condition_variable cv_;
  struct Item {
    Job job;
    std::promise<CollStats> done;
    std::optional<double> at;  // the submitter's virtual time: the job cannot start earlier
  };
  std::deque<Item> queue_;
  bool stopping_ = false;
  std::exception_ptr failed_;  // first failure; later jobs fail with it
  std::string priority_note_;
  std::thread thread_;
};

// The buffers must stay alive and untouched until the Work completes.
template <class T>
Work iallreduce(CommEngine& e, std::span<const T> in, std::span<T> out, const AllreduceOptions& opts = {}) {
  return e.submit([=](Transport& t) { return allreduce(t, in, out, opts); });
}
template <class T>
Work iallreduce(CommEngine& e, std::span<T> inout, const AllreduceOptions& opts = {}) {
  return iallreduce(e, std::span<const T>(inout), inout, opts);
}
template <class T>
Work ialltoall(CommEngine& e, std::span<const T> in, std::span<T> out, const AlltoallOptions& opts = {}) {
  return e.submit([=](Transport& t) { return alltoall(t, in, out, opts); });
}

// `in` must stay alive and `out` untouched until the Work completes.
inline Work isparse_allreduce(CommEngine& e, const compress::SparseStream& in, compress::SparseStream& out,
                              const SparseAllreduceOptions& opts = {}) {
  return e.submit([&in, &out, opts](Transport& t) { return sparse_allreduce(t, in, out, opts); });
}
// The residual store (error compensation) is used on the engine's thread.
inline Work iquantized_allreduce(CommEngine& e, std::span<float> data, const QuantizedAllreduceOptions& opts) {
  return e.submit([=](Transport& t) { return quantized_allreduce(t, data, opts); });
}

}  // namespace sparq
