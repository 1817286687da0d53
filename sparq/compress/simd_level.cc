#include "sparq/compress/simd_level.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

#include "sparq/core/error.h"

namespace sparq::compress {

namespace {

SimdLevel best_level() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return SimdLevel::Avx512;
  if (__builtin_cpu_supports("avx2")) return SimdLevel::Avx2;
#endif
  return SimdLevel::Baseline;
}

SimdLevel initial_level() {
  SimdLevel l = best_level();
  if (const char* env = std::getenv("SPARQ_SIMD")) {
    const std::string_view s(env);
    for (SimdLevel want : {SimdLevel::Baseline, SimdLevel::Avx2, SimdLevel::Avx512})
      if (s == simd_level_name(want)) l = std::min(l, want);
  }
  return l;
}

std::atomic<SimdLevel>& current() {
  static std::atomic<SimdLevel> level{initial_level()};
  return level;
}

}  // namespace

std::string_view simd_level_name(SimdLevel l) {
  switch (l) {
    case SimdLevel::Avx2: return "avx2";
    case SimdLevel::Avx512: return "avx512";
    default: return "baseline";
  }
}

std::vector<SimdLevel> supported_simd_levels() {
  std::vector<SimdLevel> v;
  for (SimdLevel l : {SimdLevel::Baseline, SimdLevel::Avx2, SimdLevel::Avx512})
    if (l <= best_level()) v.push_back(l);
  return v;
}

SimdLevel simd_level() { return current().load(std::memory_order_relaxed); }

void force_simd_level(SimdLevel l) {
  SPARQ_CHECK_AS(InputError, l <= best_level(), "this CPU cannot run SIMD level {} (best: {})", simd_level_name(l),
                 simd_level_name(best_level()));
  current().store(l, std::memory_order_relaxed);
}

}  // namespace sparq::compress
