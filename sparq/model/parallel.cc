#include "sparq/model/parallel.h"

#include "sparq/core/kernel_costs.h"
#include "sparq/core/parallel_clock.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
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
    error_ = nullptr;  // before the release below publishes the job
    gen_.fetch_add(1, std::memory_order_release);
    gen_.notify_all();
    guarded_part(0);
    for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin)
      if (spin > 2000) sched_yield();
    // Every part has finished (f and its captures are no longer in use), so
    // an exception from any of them can now leave run().
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void run_part(std::size_t p) {
    if (p >= parts_) return;
    const std::size_t begin = items_ * p / parts_, end = items_ * (p + 1) / parts_;
    if (begin < end) (*job_)(begin, end);
  }
  // An exception in a part (e.g. an embedding id out of range) is kept and
  // rethrown by run() in the caller's thread once all parts are done.
  void guarded_part(std::size_t p) {
    try {
      run_part(p);
    } catch (...) {
      std::lock_guard lk(error_mu_);
      if (!error_) error_ = std::current_exception();
    }
  }
  // A worker spins ~0.1 ms for the next job before it sleeps on the futex
  // (kWorkerSpinSeconds, which the virtual clock charges).
  // A step at batch 128 runs dozens of jobs with short serial gaps between
  // them; with a 10x shorter spin the worker slept in most gaps and every job
  // paid a wake-up: one rank, 2 threads, 800 steps: 4200-6000 context
  // switches against ~1000, and 1.08x (bf16) / 1.03x (fp32) more samples a
  // second; none at batch 1024 (docs/model.md).
  void work(int t) {
    std::uint64_t seen = 0;
    while (true) {
      std::uint64_t g = gen_.load(std::memory_order_acquire);
      for (int spin = 0; g == seen && spin < 200000; ++spin) g = gen_.load(std::memory_order_acquire);
      while (g == seen) {
        gen_.wait(seen, std::memory_order_acquire);
        g = gen_.load(std::memory_order_acquire);
      }
      seen = g;
      if (stop_.load()) return;
      guarded_part(static_cast<std::size_t>(t));
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
  std::mutex error_mu_;
  std::exception_ptr error_;
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

// Several models may run as threads of one process (LocalTransport ranks):
// whoever finds the pool taken runs its loop inline instead of waiting.
std::atomic<bool> g_busy{false};

namespace {

// A rank on the virtual clock with T threads (parallel_clock.h): the parts
// the pool would run side by side run here one after another, each timed.
// A section inside a part runs inline, as a nested call finds the pool busy.
thread_local bool t_in_section = false;

void emulated_for(std::size_t n, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& f) {
  const EmulatedThreads& e = emulated_threads();
  const std::size_t parts = std::min<std::size_t>(static_cast<std::size_t>(e.threads), n / std::max<std::size_t>(grain, 1));
  if (parts <= 1 || t_in_section) {
    if (n) f(0, n);
    return;
  }
  std::vector<double> cpu(parts);
  e.clock->begin_parallel();
  t_in_section = true;
  struct Leave {
    ~Leave() { t_in_section = false; }
  } leave;
  for (std::size_t p = 0; p < parts; ++p) {
    const double before = charged_cpu_seconds();
    const std::size_t begin = n * p / parts, end = n * (p + 1) / parts;
    if (begin < end) f(begin, end);
    cpu[p] = charged_cpu_seconds() - before;
  }
  e.clock->end_parallel(cpu);
}

}  // namespace

void parallel_for(std::size_t n, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& f) {
  if (emulated_threads().clock) return emulated_for(n, grain, f);
  bool expected = false;
  if (!g_pool || !g_busy.compare_exchange_strong(expected, true, std::memory_order_acquire)) {
    if (n) f(0, n);
    return;
  }
  struct Release {
    ~Release() { g_busy.store(false, std::memory_order_release); }
  } release;
  g_pool->run(n, grain, f);
}

}  // namespace sparq
