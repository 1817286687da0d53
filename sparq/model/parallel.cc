#include "sparq/model/parallel.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

namespace sparq {

namespace {

class Pool {
 public:
  explicit Pool(int n) : n_(n) {
    for (int t = 1; t < n_; ++t) workers_.emplace_back([this, t] { work(t); });
  }
  ~Pool() {
    stop_.store(true);
    gen_.fetch_add(1);
    gen_.notify_all();
    for (auto& w : workers_) w.join();
  }
  int size() const { return n_; }

  void run(std::size_t n, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& f) {
    const std::size_t parts = std::min<std::size_t>(static_cast<std::size_t>(n_), n / std::max<std::size_t>(grain, 1));
    if (parts <= 1) {
      if (n) f(0, n);
      return;
    }
    job_ = &f;
    items_ = n;
    parts_ = parts;
    // Every worker acknowledges every job (also one with no part for it), so
    // none can lag a generation behind and read the next job's fields.
    pending_.store(n_ - 1, std::memory_order_relaxed);
    gen_.fetch_add(1, std::memory_order_release);
    gen_.notify_all();
    run_part(0);
    for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin)
      if (spin > 2000) sched_yield();
  }

 private:
  void run_part(std::size_t p) {
    if (p >= parts_) return;
    const std::size_t begin = items_ * p / parts_, end = items_ * (p + 1) / parts_;
    if (begin < end) (*job_)(begin, end);
  }
  void work(int t) {
    std::uint64_t seen = 0;
    while (true) {
      std::uint64_t g = gen_.load(std::memory_order_acquire);
      for (int spin = 0; g == seen && spin < 20000; ++spin) g = gen_.load(std::memory_order_acquire);
      while (g == seen) {
        gen_.wait(seen, std::memory_order_acquire);
        g = gen_.load(std::memory_order_acquire);
      }
      seen = g;
      if (stop_.load()) return;
      run_part(static_cast<std::size_t>(t));
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  int n_;
  std::vector<std::thread> workers_;
  std::atomic<std::uint64_t> gen_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  const std::function<void(std::size_t, std::size_t)>* job_ = nullptr;
  std::size_t items_ = 0, parts_ = 0;
};

std::unique_ptr<Pool> g_pool;

}  // namespace

void set_compute_threads(int n) {
  n = std::max(n, 1);
  if (g_pool ? g_pool->size() == n : n == 1) return;
  g_pool.reset();
  if (n > 1) g_pool = std::make_unique<Pool>(n);
}

int compute_threads() { return g_pool ? g_pool->size() : 1; }

void parallel_for(std::size_t n, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& f) {
  if (!g_pool) {
    if (n) f(0, n);
    return;
  }
  g_pool->run(n, grain, f);
}

}  // namespace sparq
