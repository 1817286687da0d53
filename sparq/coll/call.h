#pragma once
// One invocation of a collective: the transport, the collective's name (for
// error messages), its tag and timeout, and what it put on the wire.
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sparq/transport/transport.h"

namespace sparq {

// What one collective call did, read from the transport's counters.
struct CollStats {
  std::string algo;            // the algorithm that ran (resolved from auto)
  PeerCounters wire;           // bytes/messages this rank sent and received
  int rounds = 0;              // communication rounds (steps) this rank took
  bool counted = true;         // false when the wire bypassed our counters (native MPI)
  std::optional<double> sim_seconds;  // simulated duration on this rank (SimTransport)
  // CommEngine on a virtual clock: when the job ended on the engine's timeline.
  std::optional<double> done_at;
};

// Tags of the collectives, far from user tags near 0. A caller that runs two
// collectives of the same kind concurrently gives them distinct tags.
namespace tags {
inline constexpr int kAllreduce = 30000, kReduceScatter = 30100, kAllgather = 30200,
                     kAlltoall = 30300, kBroadcast = 30400, kBarrier = 30500,
                     kSparseAllreduce = 30600, kQuantizedAllreduce = 30700,
                     kQuantizedAlltoall = 30800, kTableGather = 30900, kPipelineAct = 31000,
                     kPipelineGrad = 31100, kParamServer = 31200, kBlobGather = 31300,
                     kStreamBatch = 31400, kRowSparseAllreduce = 31500, kSparseAllgather = 31600,
                     kOwnerExchange = 31700, kPlanTrial = 31800;
}

class Call {
 public:
  // timeout 0 = the transport's.
  Call(Transport& t, std::string name, int tag, Millis timeout);

  int rank() const { return rank_; }
  int size() const { return size_; }

  template <class T>
  Request isend(int peer, std::span<const T> data) {
    return wrap([&] { return t_.isend(peer, tag_, std::as_bytes(data)); });
  }
  template <class T>
  Request isend(int peer, std::span<T> data) {
    return isend(peer, std::span<const T>(data));
  }
  template <class T>
  Request irecv(int peer, std::span<T> buf) {
    return wrap([&] { return t_.irecv(peer, tag_, std::as_writable_bytes(buf)); });
  }

  // A receive whose size only the sender knows.
  Request irecv_message(int peer) {
    return wrap([&] { return t_.irecv_message(peer, tag_); });
  }

  void wait(Request& r);
  void wait_all(std::span<Request> rs);
  void wait_all(std::vector<Request>& rs) { wait_all(std::span<Request>(rs)); }
  // Sends `out` to `peer` and receives `in` from `peer` (or another rank),
  // then waits for both; counts one round.
  template <class T>
  void sendrecv(int to, std::span<const T> out, int from, std::span<T> in) {
    Request rs[2] = {irecv(from, in), isend(to, out)};
    wait_all(rs);
    ++rounds_;
  }

  void count_round() { ++rounds_; }
  // Stats since construction; `algo` names what ran.
  CollStats finish(std::string algo) const;

 private:
  template <class F>
  Request wrap(F&& f) {
    try {
      return f();
    } catch (...) {
      rethrow_with_prefix(name_);
    }
  }
  Transport& t_;
  std::string name_;
  int tag_;
  Millis timeout_;
  int rank_, size_;
  int rounds_ = 0;
  TrafficCounters before_;
  std::optional<double> sim_start_;
};

}  // namespace sparq
