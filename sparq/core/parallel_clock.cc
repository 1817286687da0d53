#include "sparq/core/parallel_clock.h"

#include <ctime>

namespace sparq {

namespace {
thread_local EmulatedThreads t_emulated;
}  // namespace

void set_emulated_threads(EmulatedThreads e) { t_emulated = e; }
const EmulatedThreads& emulated_threads() { return t_emulated; }

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace sparq
