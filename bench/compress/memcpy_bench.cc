// The yardstick: memcpy of an n-float buffer, in the same run as the
// operators, so their GB/s can be read as a fraction of this machine's memory
// bandwidth at that size.
#include <benchmark/benchmark.h>

#include <cstring>

#include "bench/bench_data.h"

namespace sparq::bench {
namespace {

void BM_Memcpy(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<float> src = normal_floats(n), dst(n);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n * sizeof(float));
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(n * sizeof(float)));
}
BENCHMARK(BM_Memcpy)->Arg(k1M)->Arg(k16M)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sparq::bench
