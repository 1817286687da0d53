#include "sparq/transport/local_transport.h"

#include <cstring>
#include <thread>

namespace sparq {

// A receive posted before its message arrived. Filled by the sender's thread
// under the receiver's mailbox lock, so a receiver that gives up (timeout)
// can withdraw the slot without racing the copy.
struct LocalWorld::RecvSlot {
  int src, tag;
  MutBytes buf;
  bool any_size;
  std::vector<std::byte> message;  // any_size receives take the payload here
  std::size_t got = 0;
  bool done = false;
  std::string error;  // set instead of done-with-data on a size mismatch
};

struct LocalWorld::Mailbox {
  std::mutex mu;
  std::condition_variable cv;
  using Key = std::pair<int, int>;  // (source rank, tag)
  std::map<Key, std::deque<std::vector<std::byte>>> unexpected;
  std::map<Key, std::deque<std::shared_ptr<RecvSlot>>> posted;
};

namespace {

// Fills a slot from a payload; returns false on a size mismatch (slot->error set).
void fill(LocalWorld::RecvSlot& s, Bytes data, std::vector<std::byte>* movable) {
  if (s.any_size) {
    if (movable) s.message = std::move(*movable);
    else s.message.assign(data.begin(), data.end());
    s.got = s.message.size();
  } else if (data.size() != s.buf.size()) {
    s.error = fmt::format("message of {} bytes from rank {} (tag {}) where {} were expected", data.size(),
                          s.src, s.tag, s.buf.size());
  } else {
    if (!data.empty()) std::memcpy(s.buf.data(), data.data(), data.size());
    s.got = data.size();
  }
  s.done = true;
}

struct DoneState final : RequestState {
  explicit DoneState(std::size_t n) : n(n) {}
  bool test() override { return true; }
  bool wait_until(Clock::time_point) override { return true; }
  std::size_t bytes() const override { return n; }
  std::size_t n;
};

}  // namespace

struct LocalRecvState final : RequestState {
  LocalRecvState(LocalWorld* w, int rank, std::shared_ptr<LocalWorld::RecvSlot> s)
      : world(w), me(rank), slot(std::move(s)) {}

  ~LocalRecvState() override {
    // Withdraw a receive that never completed, so no sender writes into a
    // buffer that may be gone.
    auto& box = *world->boxes_[me];
    std::lock_guard lk(box.mu);
    if (slot->done) return;
    auto it = box.posted.find({slot->src, slot->tag});
    if (it == box.posted.end()) return;
    auto& q = it->second;
    for (auto qi = q.begin(); qi != q.end(); ++qi)
      if (*qi == slot) {
        q.erase(qi);
        break;
      }
  }

  bool finished() const {
    if (!slot->error.empty()) SPARQ_THROW(WireError, "{}", slot->error);
    return slot->done;
  }

  bool test() override {
    std::lock_guard lk(world->boxes_[me]->mu);
    if (!slot->done && world->aborted_) throw_aborted();
    return finished();
  }

  bool wait_until(Clock::time_point deadline) override {
    auto& box = *world->boxes_[me];
    std::unique_lock lk(box.mu);
    box.cv.wait_until(lk, deadline, [&] { return slot->done || world->aborted_.load(); });
    if (!slot->done && world->aborted_) throw_aborted();
    return finished();
  }

  [[noreturn]] void throw_aborted() const {
    SPARQ_THROW(AbortedError, "stopped waiting for rank {} (tag {}): {}", slot->src, slot->tag,
                world->abort_reason_);
  }

  std::size_t bytes() const override { return slot->got; }
  std::vector<std::byte> take_message() override {
    SPARQ_CHECK(slot->any_size, "take_message() on a fixed-size receive");
    return std::move(slot->message);
  }

  LocalWorld* world;
  int me;
  std::shared_ptr<LocalWorld::RecvSlot> slot;
};

LocalTransport::LocalTransport(LocalWorld* world, int rank, int size)
    : world_(world), rank_(rank), size_(size) {
  init_counters(size);
}

std::unique_ptr<RequestState> LocalTransport::do_isend(int peer, int tag, Bytes data) {
  auto& box = *world_->boxes_[peer];
  {
    std::lock_guard lk(box.mu);
    auto it = box.posted.find({rank_, tag});
    if (it != box.posted.end() && !it->second.empty()) {
      std::shared_ptr<LocalWorld::RecvSlot> slot = std::move(it->second.front());
      it->second.pop_front();
      fill(*slot, data, nullptr);
    } else {
      box.unexpected[{rank_, tag}].emplace_back(data.begin(), data.end());
      return std::make_unique<DoneState>(data.size());
    }
  }
  box.cv.notify_all();
  return std::make_unique<DoneState>(data.size());
}

std::unique_ptr<RequestState> LocalTransport::post_recv(int peer, int tag, MutBytes buf, bool any_size) {
  auto slot = std::make_shared<LocalWorld::RecvSlot>(LocalWorld::RecvSlot{peer, tag, buf, any_size, {}, 0, false, {}});
  auto& box = *world_->boxes_[rank_];
  std::lock_guard lk(box.mu);
  auto it = box.unexpected.find({peer, tag});
  if (it != box.unexpected.end() && !it->second.empty()) {
    std::vector<std::byte> msg = std::move(it->second.front());
    it->second.pop_front();
    fill(*slot, msg, &msg);
  } else {
    box.posted[{peer, tag}].push_back(slot);
  }
  return std::make_unique<LocalRecvState>(world_, rank_, std::move(slot));
}

std::unique_ptr<RequestState> LocalTransport::do_irecv(int peer, int tag, MutBytes buf) {
  return post_recv(peer, tag, buf, false);
}

std::unique_ptr<RequestState> LocalTransport::do_irecv_message(int peer, int tag) {
  return post_recv(peer, tag, {}, true);
}

LocalWorld::LocalWorld(int nranks) {
  SPARQ_CHECK_AS(InputError, nranks >= 1, "need at least one rank, got {}", nranks);
  for (int r = 0; r < nranks; ++r) boxes_.push_back(std::make_unique<Mailbox>());
  for (int r = 0; r < nranks; ++r) ranks_.push_back(std::make_unique<LocalTransport>(this, r, nranks));
}

LocalWorld::~LocalWorld() = default;

void LocalWorld::abort(const std::string& reason) {
  {
    std::lock_guard lk(abort_mu_);
    if (aborted_) return;
    abort_reason_ = reason;
    aborted_ = true;
  }
  // Taking each mailbox lock after setting the flag means a waiter either
  // sees the flag in its predicate or is already blocked and gets notified.
  for (auto& b : boxes_) {
    { std::lock_guard blk(b->mu); }
    b->cv.notify_all();
  }
}

void run_local(int nranks, const std::function<void(Transport&)>& fn, Millis timeout) {
  LocalWorld world(nranks);
  std::mutex mu;
  std::exception_ptr first;  // first original (non-abort) failure
  std::exception_ptr first_abort;
  int first_rank = -1;
  auto body = [&](int r) {
    try {
      world.rank(r).set_timeout(timeout);
      fn(world.rank(r));
    } catch (const AbortedError&) {
      std::lock_guard lk(mu);
      if (!first_abort) first_abort = std::current_exception();
    } catch (const std::exception& e) {
      {
        std::lock_guard lk(mu);
        if (!first) {
          first = std::current_exception();
          first_rank = r;
        }
      }
      world.abort(fmt::format("rank {} failed: {}", r, e.what()));
    }
  };
  std::vector<std::thread> threads;
  for (int r = 1; r < nranks; ++r) threads.emplace_back(body, r);
  body(0);
  for (auto& t : threads) t.join();
  if (first) {
    if (nranks == 1) std::rethrow_exception(first);
    try {
      std::rethrow_exception(first);
    } catch (...) {
      rethrow_with_prefix(fmt::format("rank {}", first_rank));
    }
  }
  if (first_abort) std::rethrow_exception(first_abort);
}

}  // namespace sparq
