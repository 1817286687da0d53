#include "sparq/transport/transport.h"

namespace sparq {

PeerCounters& PeerCounters::operator+=(const PeerCounters& o) {
  bytes_sent += o.bytes_sent;
  bytes_recv += o.bytes_recv;
  msgs_sent += o.msgs_sent;
  msgs_recv += o.msgs_recv;
  return *this;
}

PeerCounters PeerCounters::operator-(const PeerCounters& o) const {
  return {bytes_sent - o.bytes_sent, bytes_recv - o.bytes_recv, msgs_sent - o.msgs_sent,
          msgs_recv - o.msgs_recv};
}

PeerCounters TrafficCounters::total() const {
  PeerCounters t;
  for (const auto& p : per_peer) t += p;
  return t;
}

TrafficCounters TrafficCounters::operator-(const TrafficCounters& before) const {
  SPARQ_CHECK(per_peer.size() == before.per_peer.size(), "counter snapshots of different worlds");
  TrafficCounters d;
  d.per_peer.resize(per_peer.size());
  for (std::size_t i = 0; i < per_peer.size(); ++i) d.per_peer[i] = per_peer[i] - before.per_peer[i];
  return d;
}

std::vector<std::byte> RequestState::take_message() {
  SPARQ_THROW(Error, "take_message() on a request that is not an irecv_message()");
}

Request::Request(std::unique_ptr<RequestState> state, Transport* owner, Kind kind, int peer, int tag)
    : state_(std::move(state)), owner_(owner), kind_(kind), peer_(peer), tag_(tag) {}

void Request::on_complete() {
  done_ = true;
  if (kind_ == Kind::Recv) {
    auto& c = owner_->counters_[peer_];
    c.bytes_recv.fetch_add(state_->bytes(), std::memory_order_relaxed);
    c.msgs_recv.fetch_add(1, std::memory_order_relaxed);
  }
}

bool Request::test() {
  SPARQ_CHECK(state_ != nullptr, "test() on an empty request");
  if (done_) return true;
  if (state_->test()) on_complete();
  return done_;
}

bool Request::wait_until(Clock::time_point deadline) {
  SPARQ_CHECK(state_ != nullptr, "wait() on an empty request");
  if (done_) return true;
  if (!state_->wait_until(deadline)) return false;
  on_complete();
  return true;
}

void Request::wait(Millis timeout) {
  if (!wait_until(Clock::now() + timeout))
    SPARQ_THROW(TimeoutError, "timed out after {} ms waiting to {} rank {} (tag {})", timeout.count(),
                kind_ == Kind::Send ? "send to" : "receive from", peer_, tag_);
}

std::vector<std::byte> Request::take_message() {
  SPARQ_CHECK(done_, "take_message() before the receive completed");
  return state_->take_message();
}

std::size_t Request::bytes() const {
  SPARQ_CHECK(done_, "bytes() before the request completed");
  return state_->bytes();
}

void Transport::init_counters(int nranks) {
  counters_ = std::make_unique<AtomicCounters[]>(nranks);
  ncounters_ = nranks;
}

void Transport::set_timeout(Millis t) {
  SPARQ_CHECK_AS(InputError, t.count() > 0, "timeout must be positive, got {} ms", t.count());
  timeout_ = t;
}

void Transport::check_peer_tag(int peer, int tag, const char* what) const {
  SPARQ_CHECK(peer >= 0 && peer < size(), "{}: peer {} out of range [0, {})", what, peer, size());
  SPARQ_CHECK(tag >= 0 && tag <= kMaxTag, "{}: tag {} out of range [0, {}]", what, tag, kMaxTag);
}

Request Transport::isend(int peer, int tag, Bytes data) {
  check_peer_tag(peer, tag, "isend");
  auto& c = counters_[peer];
  c.bytes_sent.fetch_add(data.size(), std::memory_order_relaxed);
  c.msgs_sent.fetch_add(1, std::memory_order_relaxed);
  return Request(do_isend(peer, tag, data), this, Request::Kind::Send, peer, tag);
}

Request Transport::irecv(int peer, int tag, MutBytes buf) {
  check_peer_tag(peer, tag, "irecv");
  return Request(do_irecv(peer, tag, buf), this, Request::Kind::Recv, peer, tag);
}

Request Transport::irecv_message(int peer, int tag) {
  check_peer_tag(peer, tag, "irecv_message");
  return Request(do_irecv_message(peer, tag), this, Request::Kind::Recv, peer, tag);
}

void Transport::send(int peer, int tag, Bytes data) { isend(peer, tag, data).wait(timeout_); }

void Transport::recv(int peer, int tag, MutBytes buf) { irecv(peer, tag, buf).wait(timeout_); }

std::vector<std::byte> Transport::recv_message(int peer, int tag) {
  Request r = irecv_message(peer, tag);
  r.wait(timeout_);
  return r.take_message();
}

TrafficCounters Transport::counters() const {
  TrafficCounters t;
  t.per_peer.resize(ncounters_);
  for (int i = 0; i < ncounters_; ++i) {
    const auto& c = counters_[i];
    t.per_peer[i] = {c.bytes_sent.load(std::memory_order_relaxed), c.bytes_recv.load(std::memory_order_relaxed),
                     c.msgs_sent.load(std::memory_order_relaxed), c.msgs_recv.load(std::memory_order_relaxed)};
  }
  return t;
}

void wait_all(std::span<Request> reqs, Millis timeout) {
  for (Request& r : reqs)
    if (r.active()) r.wait(timeout);
}

}  // namespace sparq
