#pragma once
// A transport decorator with a virtual clock per rank, for predicting the
// cost of collectives on networks and rank counts this machine does not have
// (hundreds of LocalTransport ranks in one process).
//
// Model (alpha-beta, full-duplex links, one per rank):
//  - a send of b bytes posted at clock t leaves when the rank's outgoing link
//    is free: depart = max(t, tx_free); the link is then busy for b*beta;
//  - it arrives at depart + alpha + b*beta, but not before the receiver's
//    incoming link has finished the previous message: finish =
//    max(arrival, rx_free + b*beta) (so incast serialises);
//  - completing a receive moves the receiver's clock to max(clock, finish);
//    completing a send moves the sender's to max(clock, depart + b*beta);
//  - the network stack's CPU (NetModel: per message and per byte, LogGP's
//    overhead o) is computation at both ends: the sender's before the
//    message departs, the receiver's after it arrives.
//
// Every thread that uses the transport has its own timeline (its own clock):
// a rank's training thread and its communication thread (CommEngine) run
// side by side, as on a real node; the links (tx_free, rx_free) are the
// rank's, shared by its threads. A thread's clock moves with the messages it
// completes, with advance(), with virtual_wait_until() (it waited for work
// that ended then: the CommEngine's hand-over), and, when the transport
// charges CPU time, with the CPU time the thread used between its calls
// into the transport (its dense kernels charged by shape instead where the
// thread has kernel costs: charged_cpu_seconds(), kernel_costs.h). What a thread spends inside the transport is not
// charged: the emulation's own work (packing the header, the in-process
// queues, their locks and copies, waking the peer's thread) is not what a
// real host spends on a message; the network stack's CPU stands for that.
// Nor is what it spends from a test() that finds nothing to its next call (a
// polling loop), or from virtual_idle() to its next call (a hand-off to
// another thread of its rank): on a real network that time is the message's,
// which the model already counts.
// A thread computes on a core of its own, unless the rank's host has a given
// number of cores (host_cores > 0): then its threads share them (HostCores);
// or unless all the in-process ranks share a given set of cores (shared: a
// cluster emulated on one machine, SharedCores).
// Each message carries its arrival time in an 8-byte header, which the
// counters of this transport do not count (they count what the algorithm
// sent).
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "sparq/core/parallel_clock.h"
#include "sparq/transport/host_cores.h"
#include "sparq/transport/net_model.h"
#include "sparq/transport/transport.h"

namespace sparq {

class SimTransport final : public Transport, public ParallelClock {
 public:
  // cpu_scale > 0: computation takes the CPU time the thread really used,
  // times cpu_scale (sparq train --net; 2: hosts half as fast as this
  // machine's cores); 0: none unless advance() says so (benchmarks of
  // collectives alone).
  // host_cores > 0: the rank's threads compute on that many cores (0: each
  // on its own); shared: every rank's threads compute on those cores (not
  // with host_cores; it must outlive the transport).
  SimTransport(Transport& inner, NetModel net, double cpu_scale = 0, int host_cores = 0,
               SharedCores* shared = nullptr);
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string_view name() const override { return name_; }
  std::optional<double> virtual_time() const override { return now(); }
  void virtual_wait_until(double t) override;
  void virtual_idle() override;
  void virtual_collective_end() override;

  // The calling thread's clock.
  double now() const;
  // Adds modelled computation time to the calling thread's clock.
  void advance(double seconds);
  // A parallel section of the calling thread (parallel_clock.h): its parts
  // start together and each computes on a core of its own, or on the
  // host's cores where they are limited; the thread's clock moves to the
  // last part's end. On limited cores the workers' spin after the section
  // (kWorkerSpinSeconds each) occupies them too.
  void begin_parallel() override;
  void end_parallel(std::span<const double> part_cpu_s) override;

 protected:
  std::unique_ptr<RequestState> do_isend(int peer, int tag, Bytes data) override;
  std::unique_ptr<RequestState> do_irecv(int peer, int tag, MutBytes buf) override;
  std::unique_ptr<RequestState> do_irecv_message(int peer, int tag) override;

 private:
  friend struct SimRecvState;
  friend struct SimSendState;
  friend struct SimState;
  struct Timeline {
    double clock = 0;
    double cpu_mark = 0;  // the thread's CPU time when it was last charged
    bool paused = false;  // in a wait, or polling: a failed test() until its next call
  };
  // The calling thread's timeline, its CPU time charged up to now unless
  // !charge (inside a wait); the caller holds mu_.
  Timeline& line(bool charge = true) const;
  // Charges the calling thread's CPU time up to now (it enters the transport).
  void charge_cpu() const;
  // CPU time from pause to resume is not charged (a wait, or polling); any
  // other call into the transport also ends a pause.
  void pause_cpu() const;
  void resume_cpu() const;
  // When computation that starts at `start` and takes `work` seconds ends
  // (on the host's cores, if they are limited); the caller holds mu_.
  double compute(double start, double work) const;
  // Whether the rank's threads compute on limited cores (its own or shared).
  bool limited_cores() const { return cores_ || shared_; }
  // The network stack's CPU time for `bytes` at one end.
  double stack_cpu(std::size_t bytes) const;
  // Applies a received message's timing to the calling thread's clock.
  void on_receive(double arrival, std::size_t bytes);
  void on_sent(double done_at);
  Transport& inner_;
  NetModel net_;
  double cpu_scale_;
  std::string name_;
  mutable std::mutex mu_;
  mutable std::unordered_map<std::thread::id, Timeline> lines_;
  mutable std::optional<HostCores> cores_;
  SharedCores* shared_;
  double tx_free_ = 0, rx_free_ = 0;
};

}  // namespace sparq
