#pragma once
// Which instruction set the hot compression kernels (rowwise_kernels.h) run
// on. Each kernel is compiled for every level below into one binary and the
// best level this CPU supports is picked at load time, so one build runs
// everywhere and uses AVX-512 where it exists. Every level produces the same
// bytes (the kernels use only exactly rounded IEEE operations in the same
// order per element), so ranks on different CPUs agree; tests force each level
// in turn to check that.
#include <string_view>
#include <vector>

namespace sparq::compress {

enum class SimdLevel { Baseline, Avx2, Avx512 };  // Baseline: x86-64's SSE2 (or the plain target elsewhere)

std::string_view simd_level_name(SimdLevel l);  // "baseline", "avx2", "avx512"
// The levels this CPU can run, lowest first (always includes Baseline).
std::vector<SimdLevel> supported_simd_levels();
// The level in use: the best supported, or SPARQ_SIMD=baseline|avx2|avx512
// from the environment (capped at the best supported), or force_simd_level's.
SimdLevel simd_level();
// For tests and benchmarks: run the kernels at `l` from now on (process-wide,
// not for use while other threads run kernels). Throws InputError if the CPU
// lacks it.
void force_simd_level(SimdLevel l);

}  // namespace sparq::compress
