// The interaction kernels at the default model's shapes (27 vectors of 16
// per sample: 26 tables and the bottom MLP's output), batch 128 and 512 (a
// rank's share of the cluster runs' 2048), one thread, the clone the CPU
// dispatches to (docs/model.md, "Threads and speed").
#include <benchmark/benchmark.h>

#include <vector>

#include "bench/bench_data.h"
#include "sparq/model/kernels.h"

namespace sparq::bench {
namespace {

constexpr std::size_t kN = 27, kD = 16, kW = kD + kN * (kN - 1) / 2;

void BM_InteractionForward(benchmark::State& state) {
  const auto batch = static_cast<std::size_t>(state.range(0));
  const auto v = normal_floats(batch * kN * kD, 1);
  std::vector<float> out(batch * kW);
  for (auto _ : state) {
    kernels::interaction_fwd(v.data(), batch, kN, kD, out.data());
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_InteractionForward)->Arg(128)->Arg(512)->Unit(benchmark::kMicrosecond);

void BM_InteractionBackward(benchmark::State& state) {
  const auto batch = static_cast<std::size_t>(state.range(0));
  const auto v = normal_floats(batch * kN * kD, 1), dout = normal_floats(batch * kW, 2);
  std::vector<float> dv(batch * kN * kD);
  for (auto _ : state) {
    kernels::interaction_bwd(v.data(), dout.data(), batch, kN, kD, dv.data());
    benchmark::DoNotOptimize(dv.data());
  }
}
BENCHMARK(BM_InteractionBackward)->Arg(128)->Arg(512)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace sparq::bench
