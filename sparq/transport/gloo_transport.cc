#include "sparq/transport/gloo_transport.h"

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

namespace sparq {
namespace {

using GlooBuffer = std::unique_ptr<gloo::transport::UnboundBuffer>;

constexpr std::uint64_t kSlot = 0;  // every chunk of every message, in order per peer
// Largest message a header may announce: more is a corrupt header, not an
// allocation to attempt.
constexpr std::uint64_t kMaxMessage = std::uint64_t{1} << 40;
// Gloo closes every pair when a wait times out, so its own waits are given
// no real limit; sparq's deadlines are kept by the condition variable.
constexpr Millis kForever = std::chrono::hours(24 * 365);
// Chunks sent to a peer and not yet known to be written out: past
// 2 * kReclaimBatch, a send first waits for the oldest kReclaimBatch.
constexpr std::size_t kReclaimBatch = 32;

struct Header {
  std::uint64_t size;  // the whole message's
  std::int32_t tag;
  std::uint32_t len;  // this chunk's payload
};
static_assert(sizeof(Header) == 16);
constexpr std::size_t kChunkBytes = sizeof(Header) + GlooTransport::kChunk;

// One incoming message, from the moment its first chunk arrived (or a
// receive was posted for it) until its last chunk has landed.
struct Incoming {
  MutBytes buf;                // a posted fixed-size receive's buffer (lands there directly)
  bool posted = false;         // a receive was posted before the message came
  bool any_size = false;       // ... and it takes any size
  bool matched = false;        // its first chunk came
  bool done = false;           // its last chunk has landed
  std::uint64_t size = 0;
  std::vector<std::byte> data;  // payload of an unexpected message, a receive of unknown size, a wrong size
  std::exception_ptr error;     // wrong size for the posted receive
};

std::string what_of(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown error";
  }
}

// Blocks on one Gloo receive at a time for a thread that can be stopped:
// stop() aborts the wait under way, and every later one returns false.
class Stoppable {
 public:
  bool wait(gloo::transport::UnboundBuffer& b) {
    {
      std::lock_guard lk(m_);
      if (stop_) return false;
      current_ = &b;
    }
    const bool ok = b.waitRecv(kForever);
    std::lock_guard lk(m_);
    current_ = nullptr;
    return ok && !stop_;
  }
  void stop() {
    std::lock_guard lk(m_);
    stop_ = true;
    if (current_ != nullptr) current_->abortWaitRecv();
  }

 private:
  std::mutex m_;
  gloo::transport::UnboundBuffer* current_ = nullptr;
  bool stop_ = false;
};

class Receiver;

// A chunk on its way out: its bytes live until Gloo has written them.
struct Chunk {
  std::vector<std::byte> wire;
  GlooBuffer buf;
};

}  // namespace

struct GlooTransport::Impl {
  std::shared_ptr<gloo::Context> ctx;

  std::mutex mu;  // everything below, and every Incoming
  std::condition_variable cv;
  std::map<std::pair<int, int>, std::deque<std::shared_ptr<Incoming>>> posted;      // by (peer, tag)
  std::map<std::pair<int, int>, std::deque<std::shared_ptr<Incoming>>> unexpected;  // by (peer, tag)
  std::exception_ptr failure;  // the transport is broken: every wait throws this
  std::vector<bool> closed;    // per peer: its goodbye came, nothing more will

  // A receive from `src`, which has left: it fails when waited for.
  static void fail_closed(Incoming& m, int src, int tag) {
    m.error = std::make_exception_ptr(
        Error(fmt::format("rank {} closed its connection before sending the message with tag {}", src, tag)));
    m.matched = m.done = true;
  }

  // Peer `src` said goodbye (destroyed its transport): everything it sent
  // has come (one socket, in order), so a receive from it that is still
  // waiting, or posted later, fails at once instead of at its deadline.
  void close_peer(int src) {
    {
      std::lock_guard lk(mu);
      closed[src] = true;
      for (auto it = posted.begin(); it != posted.end();) {
        const auto [peer, tag] = it->first;
        if (peer != src || tag == Transport::kMaxTag) {
          ++it;
          continue;
        }
        for (auto& m : it->second) fail_closed(*m, src, tag);
        it = posted.erase(it);
      }
    }
    cv.notify_all();
  }

  std::mutex send_mu;                         // a message's chunks go out back to back
  std::vector<std::deque<Chunk>> in_flight;   // per peer, oldest first (under send_mu)
  std::vector<std::unique_ptr<Receiver>> receivers;  // per peer

  void fail(const std::string& msg) {
    {
      std::lock_guard lk(mu);
      if (!failure) failure = std::make_exception_ptr(Error(msg));
    }
    cv.notify_all();
  }
  void complete(Incoming& m) {
    {
      std::lock_guard lk(mu);
      m.done = true;
    }
    cv.notify_all();
  }

  // The Incoming the first chunk of a message from `src` is for, and where
  // the message's payload lands.
  std::pair<std::shared_ptr<Incoming>, std::byte*> match(int src, const Header& h) {
    std::lock_guard lk(mu);
    const auto key = std::pair(src, static_cast<int>(h.tag));
    std::shared_ptr<Incoming> m;
    if (auto it = posted.find(key); it != posted.end()) {
      m = it->second.front();
      it->second.pop_front();
      if (it->second.empty()) posted.erase(it);
    } else {
      m = std::make_shared<Incoming>();
      unexpected[key].push_back(m);
    }
    m->matched = true;
    m->size = h.size;
    if (m->posted && !m->any_size && h.size == m->buf.size()) return {m, m->buf.data()};
    if (m->posted && !m->any_size)
      m->error = std::make_exception_ptr(WireError(fmt::format(
          "message of {} bytes from rank {} (tag {}) where {} were expected", h.size, src, h.tag, m->buf.size())));
    m->data.resize(h.size);  // also drains a payload of the wrong size
    return {m, m->data.data()};
  }

  // Blocks until `ready` (under mu) or the deadline; throws the transport's failure.
  template <class Ready>
  bool wait_until(Clock::time_point deadline, Ready&& ready) {
    std::unique_lock lk(mu);
    const bool ok = cv.wait_until(lk, deadline, [&] { return failure != nullptr || ready(); });
    if (failure) std::rethrow_exception(failure);
    return ok;
  }
};

namespace {

// Receives everything one peer sends, chunk by chunk, in order.
class Receiver {
 public:
  Receiver(GlooTransport::Impl& im, int peer) : im_(im), peer_(peer) {
    for (int i = 0; i < GlooTransport::kPosted; ++i) {
      mem_[i].resize(kChunkBytes);
      bufs_[i] = im.ctx->createUnboundBuffer(mem_[i].data(), mem_[i].size());
      bufs_[i]->recv(peer, kSlot);
    }
    thread_ = std::thread([this] { run(); });
  }
  ~Receiver() {
    stop_.stop();
    thread_.join();
  }

 private:
  void run() {
    try {
      std::shared_ptr<Incoming> msg;  // the message under way
      std::byte* dst = nullptr;
      std::uint64_t got = 0;
      for (int i = 0;; i = (i + 1) % GlooTransport::kPosted) {
        if (!stop_.wait(*bufs_[i])) return;
        Header h;
        std::memcpy(&h, mem_[i].data(), sizeof h);
        SPARQ_CHECK_AS(WireError, h.tag >= 0 && h.tag <= Transport::kMaxTag && h.size <= kMaxMessage &&
                                      h.len <= GlooTransport::kChunk,
                       "corrupt chunk header (tag {}, message of {} bytes, chunk of {})", h.tag, h.size, h.len);
        if (!msg) {
          std::tie(msg, dst) = im_.match(peer_, h);
          got = 0;
        }
        SPARQ_CHECK_AS(WireError, h.size == msg->size && h.len <= msg->size - got,
                       "chunk of {} bytes (message of {}, tag {}) after {} of a message of {}", h.len, h.size, h.tag,
                       got, msg->size);
        if (h.len > 0) std::memcpy(dst + got, mem_[i].data() + sizeof h, h.len);
        got += h.len;
        if (got == msg->size) {
          im_.complete(*msg);
          msg.reset();
          // The first message on the reserved tag is the connect handshake,
          // the second the goodbye.
          if (h.tag == Transport::kMaxTag && ++reserved_ == 2) im_.close_peer(peer_);
        }
        bufs_[i]->recv(peer_, kSlot);
      }
    } catch (...) {
      im_.fail(fmt::format("gloo: receiving from rank {} failed: {}", peer_, what_of(std::current_exception())));
    }
  }
  GlooTransport::Impl& im_;
  const int peer_;
  int reserved_ = 0;  // messages on Transport::kMaxTag so far
  std::vector<std::byte> mem_[GlooTransport::kPosted];
  GlooBuffer bufs_[GlooTransport::kPosted];
  Stoppable stop_;
  std::thread thread_;
};

// Every send is complete once its chunks are handed to Gloo.
struct GlooSendState final : RequestState {
  std::size_t size = 0;
  bool test() override { return true; }
  bool wait_until(Clock::time_point) override { return true; }
  std::size_t bytes() const override { return size; }
};

struct GlooRecvState final : RequestState {
  GlooTransport::Impl* impl;
  std::shared_ptr<Incoming> in;
  int peer = -1, tag = -1;
  MutBytes buf;  // a fixed-size receive's buffer
  bool any_size = false;
  bool finished = false;
  Millis timeout{0};  // the transport's, when the receive was posted
  std::vector<std::byte> message;

  // Cancels a receive whose message has not come; one whose payload is
  // landing in `buf` is waited for (up to the transport's timeout), so that
  // nothing is written to memory the caller has freed.
  ~GlooRecvState() override {
    std::unique_lock lk(impl->mu);
    if (!in->matched) {
      auto it = impl->posted.find(std::pair(peer, tag));
      if (it != impl->posted.end()) std::erase(it->second, in);
      if (it != impl->posted.end() && it->second.empty()) impl->posted.erase(it);
    } else if (in->posted && !in->any_size && !in->error) {
      impl->cv.wait_for(lk, timeout, [&] { return in->done || impl->failure != nullptr; });
    }
  }

  bool test() override { return wait_until(Clock::now()); }
  bool wait_until(Clock::time_point deadline) override {
    if (finished) return true;
    if (!impl->wait_until(deadline, [&] { return in->done; })) return false;
    finish();
    return true;
  }
  // The payload has landed (no lock needed: nothing writes `in` any more).
  void finish() {
    finished = true;
    if (in->error) std::rethrow_exception(in->error);
    if (any_size) {
      message = std::move(in->data);
      return;
    }
    if (in->size != buf.size())  // an unexpected message, matched here
      SPARQ_THROW(WireError, "message of {} bytes from rank {} (tag {}) where {} were expected", in->size, peer, tag,
                  buf.size());
    if (!in->posted && in->size > 0) std::memcpy(buf.data(), in->data.data(), in->size);
  }
  std::size_t bytes() const override { return in->size; }
  std::vector<std::byte> take_message() override { return std::move(message); }
};

// The receive's Incoming: an unexpected message already under way, or a new
// posted one its peer's receiver thread will fill.
std::shared_ptr<Incoming> match_or_post(GlooTransport::Impl& im, int peer, int tag, MutBytes buf, bool any_size) {
  std::lock_guard lk(im.mu);
  const auto key = std::pair(peer, tag);
  if (auto it = im.unexpected.find(key); it != im.unexpected.end()) {
    auto m = it->second.front();
    it->second.pop_front();
    if (it->second.empty()) im.unexpected.erase(it);
    return m;
  }
  auto m = std::make_shared<Incoming>();
  m->posted = true;
  m->any_size = any_size;
  m->buf = buf;
  if (im.closed[peer] && tag != Transport::kMaxTag) {
    GlooTransport::Impl::fail_closed(*m, peer, tag);
    return m;
  }
  im.posted[key].push_back(m);
  return m;
}

// An empty message on the reserved tag to every peer and one from each:
// the connect handshake and, the second time, the goodbye.
void greet_every_peer(Transport& t) {
  std::vector<Request> reqs;
  for (int r = 0; r < t.size(); ++r)
    if (r != t.rank()) reqs.push_back(t.irecv(r, Transport::kMaxTag, {}));
  for (int r = 0; r < t.size(); ++r)
    if (r != t.rank()) reqs.push_back(t.isend(r, Transport::kMaxTag, {}));
  wait_all(reqs, t.timeout());
}

}  // namespace

GlooTransport::GlooTransport(gloo::rendezvous::Store& store, int rank, int size, const GlooAddress& address,
                             Millis timeout)
    : rank_(rank), size_(size), impl_(std::make_unique<Impl>()) {
  SPARQ_CHECK_AS(InputError, size >= 1 && rank >= 0 && rank < size, "gloo: rank {} of {} ranks", rank, size);
  set_timeout(timeout);
  init_counters(size);
  gloo::transport::tcp::attr attr;
  attr.iface = address.iface;
  attr.hostname = address.hostname;
  std::shared_ptr<gloo::transport::Device> dev;
  try {
    dev = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    SPARQ_THROW(InputError, "gloo: cannot listen on {}: {}",
                !address.iface.empty()      ? "interface " + address.iface
                : !address.hostname.empty() ? "host " + address.hostname
                                            : std::string("this host's name"),
                e.what());
  }
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  ctx->setTimeout(timeout);
  try {
    ctx->connectFullMesh(store, dev);
  } catch (const std::exception& e) {
    SPARQ_THROW(Error, "gloo: rank {} of {} could not connect to its peers: {}", rank, size, e.what());
  }
  Impl& im = *impl_;
  im.ctx = std::move(ctx);
  im.in_flight.resize(size);
  im.closed.assign(size, false);
  for (int r = 0; r < size; ++r) im.receivers.push_back(r == rank ? nullptr : std::make_unique<Receiver>(im, r));
  // No rank leaves before every rank is connected: Gloo's full mesh can be
  // complete on one rank while another still sets up its pairs, and a rank
  // that closed at once would fail that one's set-up.
  greet_every_peer(*this);
  init_counters(size);  // the handshake is not traffic of the caller's
}

// Like MPI_Finalize, what was sent reaches its peers before the connections
// close (a peer that is gone fails the wait at once; a stuck one is given the
// transport's timeout); then the receivers stop.
//
// Written to the socket is not yet read by the peer: a socket closed with
// unread bytes in it (here the peer's receive-ready notices, which its
// receiver thread keeps sending) is reset, and the reset discards what the
// peer's kernel holds of our last messages ("Connection closed by peer" in
// its last collective, seen once in the bridge test). So every rank first
// says goodbye to every peer and waits for theirs, as at connect: no socket
// closes before its peer is done with it.
GlooTransport::~GlooTransport() {
  try {
    greet_every_peer(*this);
  } catch (const std::exception&) {
    // A peer that is gone or stuck: close anyway.
  }
  {
    std::lock_guard lk(impl_->send_mu);
    for (auto& chunks : impl_->in_flight) {
      try {
        for (auto& c : chunks) c.buf->waitSend(timeout());
      } catch (const std::exception&) {
        // The peer is gone: nothing more can reach it.
      }
    }
  }
  impl_->receivers.clear();
}

std::unique_ptr<RequestState> GlooTransport::do_isend(int peer, int tag, Bytes data) {
  SPARQ_CHECK(peer != rank_, "gloo: rank {} sends to itself (tag {})", rank_, tag);
  Impl& im = *impl_;
  std::lock_guard lk(im.send_mu);
  auto& sent = im.in_flight[peer];
  std::size_t off = 0;
  do {
    if (sent.size() >= 2 * kReclaimBatch) {
      try {
        for (std::size_t i = 0; i < kReclaimBatch; ++i) {
          sent.front().buf->waitSend(kForever);
          sent.pop_front();
        }
      } catch (const std::exception& e) {
        SPARQ_THROW(Error, "gloo: sending to rank {} (tag {}) failed: {}", peer, tag, e.what());
      }
    }
    const std::size_t len = std::min(kChunk, data.size() - off);
    const Header h{data.size(), tag, static_cast<std::uint32_t>(len)};
    Chunk& c = sent.emplace_back();
    c.wire.resize(sizeof h + len);
    std::memcpy(c.wire.data(), &h, sizeof h);
    if (len > 0) std::memcpy(c.wire.data() + sizeof h, data.data() + off, len);
    c.buf = im.ctx->createUnboundBuffer(c.wire.data(), c.wire.size());
    c.buf->send(peer, kSlot);
    off += len;
  } while (off < data.size());
  auto s = std::make_unique<GlooSendState>();
  s->size = data.size();
  return s;
}

std::unique_ptr<RequestState> GlooTransport::post_recv(int peer, int tag, MutBytes buf, bool any_size) {
  SPARQ_CHECK(peer != rank_, "gloo: rank {} receives from itself (tag {})", rank_, tag);
  auto s = std::make_unique<GlooRecvState>();
  s->impl = impl_.get();
  s->buf = buf;
  s->any_size = any_size;
  s->peer = peer;
  s->tag = tag;
  s->timeout = timeout();
  s->in = match_or_post(*impl_, peer, tag, buf, any_size);
  return s;
}

std::unique_ptr<RequestState> GlooTransport::do_irecv(int peer, int tag, MutBytes buf) {
  return post_recv(peer, tag, buf, false);
}

std::unique_ptr<RequestState> GlooTransport::do_irecv_message(int peer, int tag) {
  return post_recv(peer, tag, {}, true);
}

}  // namespace sparq
