#pragma once
// The point-to-point interface every collective is written against. Three
// implementations: MpiTransport (Open MPI processes), LocalTransport (ranks as
// threads in one process) and, later, a virtual-clock decorator.
//
// Semantics (the common subset of MPI point-to-point that the algorithms need):
//  - messages between one (source, tag) pair and a receiver are matched in the
//    order they were sent and the receives were posted (MPI's non-overtaking);
//  - irecv() expects exactly buf.size() bytes: any other size is a WireError;
//    irecv_message() receives a message whose size the receiver does not know;
//  - a send buffer must stay untouched and alive until its request completes,
//    a receive buffer until its request completes;
//  - every wait has a timeout; a wait that sees nothing arrive in time throws
//    TimeoutError naming the peer and tag, never hangs.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sparq/core/error.h"

namespace sparq {

using Bytes = std::span<const std::byte>;
using MutBytes = std::span<std::byte>;
using Clock = std::chrono::steady_clock;
// Seconds from t to now (phase timings and accounting).
inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
using Millis = std::chrono::milliseconds;

// Traffic with one peer, or in total.
struct PeerCounters {
  std::uint64_t bytes_sent = 0, bytes_recv = 0, msgs_sent = 0, msgs_recv = 0;
  PeerCounters& operator+=(const PeerCounters& o);
  PeerCounters operator-(const PeerCounters& o) const;
  bool operator==(const PeerCounters&) const = default;
};

// A snapshot of a transport's counters, one entry per peer rank.
struct TrafficCounters {
  std::vector<PeerCounters> per_peer;
  PeerCounters total() const;
  TrafficCounters operator-(const TrafficCounters& before) const;
};

// A transport's half of a pending operation.
class RequestState {
 public:
  virtual ~RequestState() = default;
  // True once complete. Throws on a failed operation (e.g. wrong size).
  virtual bool test() = 0;
  // Blocks until complete (true) or until `deadline` passes first (false).
  virtual bool wait_until(Clock::time_point deadline) = 0;
  // Bytes this operation moved (known once complete).
  virtual std::size_t bytes() const = 0;
  // The payload of a completed irecv_message().
  virtual std::vector<std::byte> take_message();
};

class Transport;

// A pending send or receive. Move-only; destroying a pending request cancels
// it (a receive) or lets it finish (a send) — only on error paths.
class Request {
 public:
  enum class Kind { Send, Recv };
  Request() = default;
  Request(std::unique_ptr<RequestState> state, Transport* owner, Kind kind, int peer, int tag);
  Request(Request&&) noexcept = default;
  Request& operator=(Request&&) noexcept = default;

  bool test();
  void wait(Millis timeout);  // throws TimeoutError naming peer and tag
  // Waits until `deadline`; false if it passed first (nothing thrown).
  bool wait_until(Clock::time_point deadline);
  // The message of a completed irecv_message(), moved out.
  std::vector<std::byte> take_message();
  // Bytes a completed request moved (what a decorator's own counters need).
  std::size_t bytes() const;

  bool active() const { return state_ != nullptr && !done_; }
  int peer() const { return peer_; }
  int tag() const { return tag_; }
  Kind kind() const { return kind_; }

 private:
  void on_complete();
  std::unique_ptr<RequestState> state_;
  Transport* owner_ = nullptr;
  Kind kind_ = Kind::Send;
  int peer_ = -1, tag_ = -1;
  bool done_ = false;
};

class Transport {
 public:
  // Largest tag every transport accepts (MPI guarantees at least 32767).
  static constexpr int kMaxTag = 32767;
  static constexpr Millis kDefaultTimeout{std::chrono::minutes(5)};

  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string_view name() const = 0;

  Request isend(int peer, int tag, Bytes data);
  Request irecv(int peer, int tag, MutBytes buf);
  Request irecv_message(int peer, int tag);

  // Blocking forms, with the transport's timeout.
  void send(int peer, int tag, Bytes data);
  void recv(int peer, int tag, MutBytes buf);
  std::vector<std::byte> recv_message(int peer, int tag);

  TrafficCounters counters() const;

  // This rank's simulated time in seconds, on transports that keep a virtual
  // clock (SimTransport); empty on real ones.
  // With several threads on one rank (a CommEngine), each has its own clock:
  // this is the calling thread's.
  virtual std::optional<double> virtual_time() const { return std::nullopt; }
  // Moves the calling thread's clock to at least t: it waited for work that
  // another thread finished at virtual time t. Nothing on real transports.
  virtual void virtual_wait_until(double /*t*/) {}
  // The calling thread is about to block on another thread of its rank (a
  // hand-off): the CPU it uses until its next call into the transport is the
  // emulation's, not its computation. Nothing on real transports.
  virtual void virtual_idle() {}
  // The calling thread (a CommEngine's) ended a collective job: on a virtual
  // clock its clock moves on by the network model's latency a collective,
  // no core busy. Nothing on real transports.
  virtual void virtual_collective_end() {}

  Millis timeout() const { return timeout_; }
  void set_timeout(Millis t);

 protected:
  Transport() = default;
  // Call once size() is known.
  void init_counters(int nranks);
  virtual std::unique_ptr<RequestState> do_isend(int peer, int tag, Bytes data) = 0;
  virtual std::unique_ptr<RequestState> do_irecv(int peer, int tag, MutBytes buf) = 0;
  virtual std::unique_ptr<RequestState> do_irecv_message(int peer, int tag) = 0;

 private:
  friend class Request;
  struct AtomicCounters {
    std::atomic<std::uint64_t> bytes_sent{0}, bytes_recv{0}, msgs_sent{0}, msgs_recv{0};
  };
  void check_peer_tag(int peer, int tag, const char* what) const;
  std::unique_ptr<AtomicCounters[]> counters_;
  int ncounters_ = 0;
  Millis timeout_ = kDefaultTimeout;
};

// Waits for every request; the first failure is thrown (the rest stay pending
// and are cancelled when destroyed).
void wait_all(std::span<Request> reqs, Millis timeout);

}  // namespace sparq
