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

constexpr std::uint64_t kControlSlot = 0;  // headers
constexpr std::uint64_t kDataSlot = 1;     // payloads, in the order of their headers
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
  int pending = 0;  // Gloo sends not yet complete
};

// Waits, in order, for the Gloo operations given to it, and reports each
// completion: Gloo can only block on one buffer, so each peer and direction
// has a thread that does the blocking for the requests.
class Completer {
 public:
  using Done = std::function<void(std::exception_ptr)>;
  Completer(bool sends) : sends_(sends), thread_([this] { run(); }) {}
  ~Completer() {
    {
      std::lock_guard lk(m_);
      stop_ = true;
      if (current_ != nullptr) sends_ ? current_->abortWaitSend() : current_->abortWaitRecv();
    }
    cv_.notify_all();
    thread_.join();
  }
  void add(GlooBuffer buf, Done done) {
    {
      std::lock_guard lk(m_);
      queue_.push_back({std::move(buf), std::move(done)});
    }
    cv_.notify_all();
  }

 private:
  struct Item {
    GlooBuffer buf;
    Done done;
  };
  void run() {
    for (;;) {
      Item item;
      {
        std::unique_lock lk(m_);
        cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        item = std::move(queue_.front());
        queue_.pop_front();
        current_ = item.buf.get();
      }
      std::exception_ptr error;
      bool completed = false;
      try {
        completed = sends_ ? item.buf->waitSend(kForever) : item.buf->waitRecv(kForever);
      } catch (...) {
        error = std::current_exception();
      }
      {
        std::lock_guard lk(m_);
        current_ = nullptr;
        if (!completed && !error) return;  // aborted: the transport is closing
      }
      item.done(error);
      if (error) return;  // the pair is broken; everything after fails too
    }
  }
  const bool sends_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  gloo::transport::UnboundBuffer* current_ = nullptr;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the rest is built
};

std::string gloo_message(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown error";
  }
}

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
  std::vector<std::unique_ptr<Completer>> send_done, recv_done;  // per peer

  Header in{};
  GlooBuffer control;
  std::atomic<bool> stopping{false};
  std::thread progress;

  void fail(std::exception_ptr e) {
    {
      std::lock_guard lk(mu);
      if (!failure) failure = e;
    }
    cv.notify_all();
  }

  // The progress thread: every header, from any peer, posts its payload's
  // receive at once.
  void run() {
    std::vector<int> peers;
    for (int r = 0; r < size; ++r)
      if (r != rank) peers.push_back(r);
    try {
      while (!stopping.load()) {
        control->recv(peers, kControlSlot);
        int src = -1;
        if (!control->waitRecv(&src, kForever)) return;  // aborted: closing
        on_header(src, in);
      }
    } catch (...) {
      if (!stopping.load()) fail(std::current_exception());
    }
  }

  void on_header(int src, const Header& h) {
    SPARQ_CHECK_AS(WireError, h.zero == 0 && h.tag >= 0 && h.tag <= kMaxTag && h.size <= kMaxMessage,
                   "gloo: corrupt message header from rank {} (tag {}, {} bytes)", src, h.tag, h.size);
    std::shared_ptr<Incoming> m;
    std::byte* dst = nullptr;
    {
      std::lock_guard lk(mu);
      const auto key = std::pair(src, static_cast<int>(h.tag));
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
      if (m->posted && !m->any_size && h.size == m->buf.size()) {
        dst = m->buf.data();
      } else {
        if (m->posted && !m->any_size)
          m->error = std::make_exception_ptr(WireError(fmt::format(
              "message of {} bytes from rank {} (tag {}) where {} were expected", h.size, src, h.tag, m->buf.size())));
        m->data.resize(h.size);  // also drains a payload of the wrong size
        dst = m->data.data();
      }
      if (h.size == 0) m->done = true;
    }
    if (h.size == 0) {
      cv.notify_all();
      return;
    }
    auto body = ctx->createUnboundBuffer(dst, h.size);
    body->recv(src, kDataSlot);
    recv_done[src]->add(std::move(body), [this, m, src](std::exception_ptr e) {
      if (e) return fail(std::make_exception_ptr(
                 Error(fmt::format("gloo: receiving from rank {} failed: {}", src, gloo_message(e)))));
      {
        std::lock_guard lk(mu);
        m->done = true;
      }
      cv.notify_all();
    });
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

struct GlooSendState final : RequestState {
  GlooTransport::Impl* impl;
  std::shared_ptr<Outgoing> out;
  bool test() override { return wait_until(Clock::now()); }
  bool wait_until(Clock::time_point deadline) override {
    return impl->wait_until(deadline, [&] { return out->pending == 0; });
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
    im.send_done.push_back(r == rank ? nullptr : std::make_unique<Completer>(true));
    im.recv_done.push_back(r == rank ? nullptr : std::make_unique<Completer>(false));
  }
  if (size > 1) {
    im.control = im.ctx->createUnboundBuffer(&im.in, sizeof im.in);
    im.progress = std::thread([&im] { im.run(); });
  }
}

GlooTransport::~GlooTransport() {
  Impl& im = *impl_;
  im.stopping = true;
  if (im.progress.joinable()) {
    im.control->abortWaitRecv();
    im.progress.join();
  }
  im.send_done.clear();
  im.recv_done.clear();
}

std::unique_ptr<RequestState> GlooTransport::do_isend(int peer, int tag, Bytes data) {
  SPARQ_CHECK(peer != rank_, "gloo: rank {} sends to itself (tag {})", rank_, tag);
  Impl& im = *impl_;
  auto out = std::make_shared<Outgoing>();
  out->header = {data.size(), tag, 0};
  out->pending = data.empty() ? 1 : 2;
  auto done = [&im, out, peer](std::exception_ptr e) {
    if (e) return im.fail(std::make_exception_ptr(
               Error(fmt::format("gloo: sending to rank {} failed: {}", peer, gloo_message(e)))));
    {
      std::lock_guard lk(im.mu);
      --out->pending;
    }
    im.cv.notify_all();
  };
  {
    std::lock_guard lk(im.send_mu);
    auto head = im.ctx->createUnboundBuffer(&out->header, sizeof out->header);
    head->send(peer, kControlSlot);
    im.send_done[peer]->add(std::move(head), done);
    if (!data.empty()) {
      // Gloo's buffers are not const-typed; a send only reads.
      auto body = im.ctx->createUnboundBuffer(const_cast<std::byte*>(data.data()), data.size());
      body->send(peer, kDataSlot);
      im.send_done[peer]->add(std::move(body), done);
    }
  }
  auto s = std::make_unique<GlooSendState>();
  s->impl = &im;
  s->out = std::move(out);
  return s;
}

namespace {
// The receive's Incoming: an unexpected message already under way, or a new
// posted one the progress thread will fill.
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
