// Selectors: the finiteness check, threshold-mask-pack, exact top-k, the DCT-DP step (L = 1 and
// L = 1000 amortized), DCT-MP row selection and bucket top-k. Bytes are the
// float input read (4 per value).
#include <benchmark/benchmark.h>

#include <array>

#include "bench/bench_data.h"
#include "sparq/compress/dct_dp.h"
#include "sparq/compress/dct_mp.h"
#include "sparq/compress/threshold_pack.h"
#include "sparq/compress/topk.h"
#include "sparq/core/finite.h"

namespace sparq::bench {
namespace {

using namespace sparq::compress;

constexpr double kEta = 0.99;  // DCT-DP's sparsity in the table (1% kept)

void set_bytes(benchmark::State& state, std::size_t n) {
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(n * sizeof(float)));
}

void BM_ThresholdMaskPack(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::vector<float> x = normal_floats(n);
  std::vector<float> scratch;
  const float tau = sparsity_threshold(x, kEta, scratch);
  std::vector<std::uint32_t> idx(n);
  std::vector<float> val(n);
  std::size_t kept = 0;
  for (auto _ : state) {
    kept = threshold_pack(x, tau, idx, val);
    benchmark::DoNotOptimize(kept);
  }
  state.counters["kept"] = static_cast<double>(kept);
  set_bytes(state, n);
}
BENCHMARK(BM_ThresholdMaskPack)->Arg(k1M)->Arg(k16M)->Unit(benchmark::kMillisecond);

// The finiteness check every exchange runs on its input first (core/finite.h):
// its cost against the DCT-DP step's below.
void BM_FirstNonFinite(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::vector<float> x = normal_floats(n);
  for (auto _ : state) benchmark::DoNotOptimize(first_non_finite(x));
  set_bytes(state, n);
}
BENCHMARK(BM_FirstNonFinite)->Arg(k1M)->Arg(k16M)->Unit(benchmark::kMillisecond);

void BM_TopK(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::vector<float> x = normal_floats(n);
  std::vector<std::uint32_t> idx;
  std::vector<float> scratch;
  for (auto _ : state) {
    topk_indices(x, kept_count(n, kEta), idx, scratch);
    benchmark::DoNotOptimize(idx.data());
  }
  set_bytes(state, n);
}
BENCHMARK(BM_TopK)->Arg(k1M)->Arg(k16M)->Unit(benchmark::kMillisecond);

// One DCT-DP step per iteration on a rotating pool of independent gradients
// (a constant gradient would make the residual grow without bound between
// threshold updates). Iteration i runs step k = L + i, so a threshold step
// falls on the first iteration and then every L-th: with Iterations(L) the
// mean over the run is exactly the amortized cost of one life span.
void BM_DctDpStep(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto life = static_cast<std::uint64_t>(state.range(1));
  const double tolerance = state.range(2) / 100.0;  // adaptive recompute, percent; 0 = off
  std::array<std::vector<float>, 4> grads;
  for (std::size_t g = 0; g < grads.size(); ++g) grads[g] = normal_floats(n, 11 + g);
  ErrorFeedbackStore store;
  DctDp dct({.eta = kEta, .life_span = life, .adaptive_tolerance = tolerance}, store);
  SparseStream out;
  dct.step("fc", 0, grads[3], out);  // the tensor's first step (always a threshold step), untimed
  std::uint64_t k = life;
  std::size_t kept = 0;
  for (auto _ : state) {
    kept += dct.step("fc", k, grads[k % grads.size()], out).kept;
    ++k;
  }
  state.counters["recomputes"] = static_cast<double>(dct.stats().recomputes - 1);
  state.counters["adaptive"] = static_cast<double>(dct.stats().adaptive_recomputes);
  state.counters["kept_frac"] = static_cast<double>(kept) / static_cast<double>(state.iterations() * n);
  set_bytes(state, n);
}
BENCHMARK(BM_DctDpStep)
    ->Args({k1M, 1, 0})
    ->Args({k16M, 1, 0})
    ->Unit(benchmark::kMillisecond);
// The stale threshold lets the kept fraction drift up as residuals build; the
// adaptive row (recompute when the kept count is off by more than 100%)
// shows what bounding that drift costs.
BENCHMARK(BM_DctDpStep)
    ->Args({k1M, 1000, 0})
    ->Args({k16M, 1000, 0})
    ->Args({k1M, 1000, 100})
    ->Args({k16M, 1000, 100})
    ->Iterations(1000)
    ->Unit(benchmark::kMillisecond);

void BM_DctMpSelect(benchmark::State& state) {
  const auto rows = static_cast<std::size_t>(state.range(0)), cols = static_cast<std::size_t>(state.range(1));
  const std::vector<float> act = normal_floats(rows * cols);
  std::vector<float> packed(rows * kept_count(cols, 0.95));
  for (auto _ : state) {
    const RowMask mask = dct_mp_select(act, cols, 0.95);
    dct_mp_gather(mask, act, packed);
    benchmark::DoNotOptimize(packed.data());
  }
  set_bytes(state, rows * cols);
}
BENCHMARK(BM_DctMpSelect)->Args({128, 512})->Unit(benchmark::kMicrosecond);

void BM_BucketTopK(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::vector<float> x = normal_floats(n);
  std::vector<std::uint32_t> idx;
  std::vector<float> val;
  for (auto _ : state) {
    bucket_topk(x, 512, 5, idx, val);  // ~1% of each 512-bucket
    benchmark::DoNotOptimize(idx.data());
  }
  set_bytes(state, n);
}
BENCHMARK(BM_BucketTopK)->Arg(k1M)->Arg(k16M)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sparq::bench
