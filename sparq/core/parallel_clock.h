#pragma once
// Threads a rank on the virtual clock. In-process ranks on a virtual clock
// (sparq train --net) cannot each own a pool of compute threads: P ranks
// share this machine's cores, and a thread's CPU time is the clock's
// measure of work. So a rank that models T threads runs each parallel_for's
// T parts one after another on its own thread, times each part's CPU, and
// tells its clock, which charges the parts as if they had run side by side
// (on the host's cores, when they are limited). model/ calls it, transport/
// implements it; neither knows the other.
#include <span>

namespace sparq {

class ParallelClock {
 public:
  virtual ~ParallelClock() = default;
  // A parallel section starts on the calling thread: the clock charges the
  // thread's work up to here.
  virtual void begin_parallel() = 0;
  // It ended; its parts took these CPU seconds each (their sum is what the
  // thread used in between, which the clock must not charge again).
  virtual void end_parallel(std::span<const double> part_cpu_s) = 0;
};

// After each job a pool worker spins this long for the next before it sleeps
// (parallel.cc's 200000 polls): on a host with fewer cores than threads that
// spin takes a core from the rank's other threads.
inline constexpr double kWorkerSpinSeconds = 1e-4;

class KernelCosts;

struct EmulatedThreads {
  int threads = 1;
  ParallelClock* clock = nullptr;  // where threads > 1
  KernelCosts* costs = nullptr;    // kernels charged by shape or units (kernel_costs.h)
};

// The calling thread's (threads 1, no clock: none). Set by the rank's own
// thread before it trains; parallel_for() and the GEMMs' split read it.
void set_emulated_threads(EmulatedThreads e);
const EmulatedThreads& emulated_threads();

// The calling thread's CPU time, seconds.
double thread_cpu_seconds();

}  // namespace sparq
