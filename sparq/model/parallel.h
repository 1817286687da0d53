#pragma once
// A tiny fork-join pool for the model's non-GEMM loops (interaction,
// embedding bags, ReLU-gradient passes, SGD). Work is split into contiguous
// ranges of independent items (samples, tables, columns, elements), so
// results are bitwise the same for any number of threads.
//
// Workers spin briefly after a job (the next one usually follows within
// microseconds), then sleep on a futex (std::atomic::wait) so they leave the
// cores to OpenBLAS's threads during a GEMM. The caller, waiting for the
// workers, yields after a short spin (a preempted worker on a loaded machine
// must get the core back).
#include <cstddef>
#include <functional>

namespace sparq {

// Threads for parallel_for (the calling thread included); 1 = run inline.
void set_compute_threads(int n);
int compute_threads();

// Calls f(begin, end) on disjoint ranges covering [0, n), at most
// compute_threads() at once, each of at least `grain` items; returns when all
// are done. Safe from several threads at once: a caller that finds the pool
// busy (another model replica, or a nested call) runs f(0, n) inline.
// set_compute_threads() must not run concurrently with parallel_for().
// A thread with emulated threads (parallel_clock.h) runs the parts itself,
// one after another, and its clock charges them as if side by side; the
// results are the same (the parts are the same ranges).
void parallel_for(std::size_t n, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& f);

}  // namespace sparq
