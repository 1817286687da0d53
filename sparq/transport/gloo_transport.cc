#include "sparq/transport/gloo_transport.h"

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace sparq {
namespace {

using GlooBuffer = std::unique_ptr<gloo::transport::UnboundBuffer>;

constexpr std::uint64_t kControlSlot = 0;  // headers, with small payloads inline
constexpr std::uint64_t kDataSlot = 1;     // large payloads, in the order of their headers
// Largest payload a header may announce: more is a corrupt header, not an
// allocation to attempt.
constexpr std::uint64_t kMaxMessage = std::uint64_t{1} << 40;
// Gloo closes every pair when a wait times out, so its own waits are given
// no real limit; sparq's deadlines are kept by the condition variable.
constexpr Millis kForever = std::chrono::hours(24 * 365);

struct Header {
  std::uint64_t size;
  std::int32_t tag;
  std::int32_t zero;
};
static_assert(sizeof(Header) == 16);
constexpr std::size_t kControlBytes = sizeof(Header) + GlooTransport::kInline;

// One incoming message, from the moment its header arrived (or a receive was
// posted for it) until its payload has landed.
struct Incoming {
  MutBytes buf;                // a posted fixed-size receive's buffer (lands there directly)
  bool posted = false;         // a receive was posted before the header came
  bool any_size = false;       // ... and it takes any size
  bool matched = false;        // the header came
  bool done = false;           // the payload has landed
  std::uint64_t size = 0;
  std::vector<std::byte> data;  // payload of an unexpected message, a receive of unknown size, a wrong size
  std::exception_ptr error;     // wrong size for the posted receive
};

struct Outgoing {
  Header header{};
  std::vector<std::byte> wire;  // the control message: header, and an inline payload
  bool done = false;            // the caller's buffer may be reused
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

// Blocks on one Gloo operation at a time for a thread that can be stopped:
// stop() aborts the wait under way, and every later one returns false.
class Stoppable {
 public:
  bool wait(gloo::transport::UnboundBuffer& b, bool send) {
    {
      std::lock_guard lk(m_);
      if (stop_) return false;
      current_ = &b;
    }
    const bool ok = send ? b.waitSend(kForever) : b.waitRecv(kForever);
    std::lock_guard lk(m_);
    current_ = nullptr;
    return ok && !stop_;
  }
  void stop() {
    std::lock_guard lk(m_);
    stop_ = true;
    if (current_ != nullptr) {
      current_->abortWaitSend();
      current_->abortWaitRecv();
    }
  }

 private:
  std::mutex m_;
  gloo::transport::UnboundBuffer* current_ = nullptr;
  bool stop_ = false;
};

class Receiver;
class SendWaiter;

}  // namespace

struct GlooTransport::Impl {
  std::shared_ptr<gloo::Context> ctx;
  int rank = 0, size = 1;
  Millis timeout{0};

  std::mutex mu;  // everything below, and every Incoming / Outgoing
  std::condition_variable cv;
  std::map<std::pair<int, int>, std::deque<std::shared_ptr<Incoming>>> posted;      // by (peer, tag)
  std::map<std::pair<int, int>, std::deque<std::shared_ptr<Incoming>>> unexpected;  // by (peer, tag)
  std::exception_ptr failure;  // the transport is broken: every wait throws this

  std::mutex send_mu;  // a header and its payload go out back to back
  std::vector<std::unique_ptr<Receiver>> receivers;   // per peer
  std::vector<std::unique_ptr<SendWaiter>> senders;   // per peer

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

  // The Incoming a header from `src` is for, and where its payload lands.
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

// Receives everything one peer sends, in order: two control receives stay
// posted (Gloo sends data only to a posted receive, and a receive posted in
// advance lets the data go out at once).
class Receiver {
 public:
  Receiver(GlooTransport::Impl& im, int peer) : im_(im), peer_(peer) {
    for (int i = 0; i < 2; ++i) {
      mem_[i].resize(kControlBytes);
      ctrl_[i] = im.ctx->createUnboundBuffer(mem_[i].data(), mem_[i].size());
      ctrl_[i]->recv(peer, kControlSlot);
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
      for (int i = 0;; i ^= 1) {
        if (!stop_.wait(*ctrl_[i], false)) return;
        Header h;
        std::memcpy(&h, mem_[i].data(), sizeof h);
        SPARQ_CHECK_AS(WireError, h.zero == 0 && h.tag >= 0 && h.tag <= Transport::kMaxTag && h.size <= kMaxMessage,
                       "corrupt message header (tag {}, {} bytes)", h.tag, h.size);
        auto [m, dst] = im_.match(peer_, h);
        if (h.size <= GlooTransport::kInline) {
          if (h.size > 0) std::memcpy(dst, mem_[i].data() + sizeof h, h.size);
        } else {
          auto body = im_.ctx->createUnboundBuffer(dst, h.size);
          body->recv(peer_, kDataSlot);
          if (!stop_.wait(*body, false)) return;
        }
        im_.complete(*m);
        ctrl_[i]->recv(peer_, kControlSlot);
      }
    } catch (...) {
      im_.fail(fmt::format("gloo: receiving from rank {} failed: {}", peer_, what_of(std::current_exception())));
    }
  }
  GlooTransport::Impl& im_;
  const int peer_;
  std::vector<std::byte> mem_[2];
  GlooBuffer ctrl_[2];
  Stoppable stop_;
  std::thread thread_;
};

// Waits, in order, for the Gloo sends to one peer, keeping each send's
// memory alive until Gloo is done with it.
class SendWaiter {
 public:
  SendWaiter(GlooTransport::Impl& im, int peer) : im_(im), peer_(peer), thread_([this] { run(); }) {}
  ~SendWaiter() {
    {
      std::lock_guard lk(m_);
      closing_ = true;
    }
    cv_.notify_all();
    stop_.stop();
    thread_.join();
  }
  // `last`: when this send completes, so has the message.
  void add(GlooBuffer buf, std::shared_ptr<Outgoing> out, bool last) {
    {
      std::lock_guard lk(m_);
      queue_.push_back({std::move(buf), std::move(out), last});
    }
    cv_.notify_all();
  }

 private:
  struct Item {
    GlooBuffer buf;
    std::shared_ptr<Outgoing> out;
    bool last;
  };
  void run() {
    try {
      for (;;) {
        Item item;
        {
          std::unique_lock lk(m_);
          cv_.wait(lk, [&] { return closing_ || !queue_.empty(); });
          if (closing_) return;
          item = std::move(queue_.front());
          queue_.pop_front();
        }
        if (!stop_.wait(*item.buf, true)) return;
        if (!item.last) continue;
        {
          std::lock_guard lk(im_.mu);
          item.out->done = true;
        }
        im_.cv.notify_all();
      }
    } catch (...) {
      im_.fail(fmt::format("gloo: sending to rank {} failed: {}", peer_, what_of(std::current_exception())));
    }
  }
  GlooTransport::Impl& im_;
  const int peer_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool closing_ = false;
  Stoppable stop_;
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace

namespace {

struct GlooSendState final : RequestState {
  GlooTransport::Impl* impl;
  std::shared_ptr<Outgoing> out;
  bool test() override { return wait_until(Clock::now()); }
  bool wait_until(Clock::time_point deadline) override {
    return impl->wait_until(deadline, [&] { return out->done; });
  }
  std::size_t bytes() const override { return out->header.size; }
};

struct GlooRecvState final : RequestState {
  GlooTransport::Impl* impl;
  std::shared_ptr<Incoming> in;
  int peer = -1, tag = -1;
  MutBytes buf;       // a fixed-size receive's buffer
  bool any_size = false;
  bool finished = false;
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
      impl->cv.wait_for(lk, impl->timeout, [&] { return in->done || impl->failure != nullptr; });
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
      SPARQ_THROW(WireError, "message of {} bytes where {} were expected", in->size, buf.size());
    if (!in->posted && in->size > 0) std::memcpy(buf.data(), in->data.data(), in->size);
  }
  std::size_t bytes() const override { return in->size; }
  std::vector<std::byte> take_message() override { return std::move(message); }
};

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
  im.rank = rank;
  im.size = size;
  im.timeout = timeout;
  for (int r = 0; r < size; ++r) {
    im.receivers.push_back(r == rank ? nullptr : std::make_unique<Receiver>(im, r));
    im.senders.push_back(r == rank ? nullptr : std::make_unique<SendWaiter>(im, r));
  }
}

GlooTransport::~GlooTransport() {
  impl_->receivers.clear();
  impl_->senders.clear();
}

std::unique_ptr<RequestState> GlooTransport::do_isend(int peer, int tag, Bytes data) {
  SPARQ_CHECK(peer != rank_, "gloo: rank {} sends to itself (tag {})", rank_, tag);
  Impl& im = *impl_;
  auto out = std::make_shared<Outgoing>();
  out->header = {data.size(), tag, 0};
  const bool inline_payload = data.size() <= kInline;
  out->wire.resize(sizeof(Header) + (inline_payload ? data.size() : 0));
  std::memcpy(out->wire.data(), &out->header, sizeof(Header));
  if (inline_payload) {
    if (!data.empty()) std::memcpy(out->wire.data() + sizeof(Header), data.data(), data.size());
    out->done = true;  // the caller's buffer is free at once
  }
  {
    std::lock_guard lk(im.send_mu);
    auto head = im.ctx->createUnboundBuffer(out->wire.data(), out->wire.size());
    head->send(peer, kControlSlot);
    im.senders[peer]->add(std::move(head), out, false);
    if (!inline_payload) {
      // Gloo's buffers are not const-typed; a send only reads.
      auto body = im.ctx->createUnboundBuffer(const_cast<std::byte*>(data.data()), data.size());
      body->send(peer, kDataSlot);
      im.senders[peer]->add(std::move(body), out, true);
    }
  }
  auto s = std::make_unique<GlooSendState>();
  s->impl = &im;
  s->out = std::move(out);
  return s;
}

namespace {
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
  im.posted[key].push_back(m);
  return m;
}
}  // namespace

std::unique_ptr<RequestState> GlooTransport::do_irecv(int peer, int tag, MutBytes buf) {
  SPARQ_CHECK(peer != rank_, "gloo: rank {} receives from itself (tag {})", rank_, tag);
  auto s = std::make_unique<GlooRecvState>();
  s->impl = impl_.get();
  s->buf = buf;
  s->peer = peer;
  s->tag = tag;
  s->in = match_or_post(*impl_, peer, tag, buf, false);
  return s;
}

std::unique_ptr<RequestState> GlooTransport::do_irecv_message(int peer, int tag) {
  SPARQ_CHECK(peer != rank_, "gloo: rank {} receives from itself (tag {})", rank_, tag);
  auto s = std::make_unique<GlooRecvState>();
  s->impl = impl_.get();
  s->any_size = true;
  s->in = match_or_post(*impl_, peer, tag, {}, true);
  s->peer = peer;
  s->tag = tag;
  return s;
}

}  // namespace sparq
