// Sparse-stream merge: the sum of two sparse streams of dimension n with
// independent random supports at density 0.1%, 1% and 10% (the sum stays
// sparse: 2 * 10% < delta = 50%). Bytes are the two inputs' pairs (8 per pair).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>

#include "bench/bench_data.h"
#include "sparq/compress/sparse_stream.h"

namespace sparq::bench {
namespace {

using namespace sparq::compress;

SparseStream random_stream(std::size_t n, double density, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution keep(density);
  std::vector<std::uint32_t> idx;
  std::vector<float> val;
  for (std::size_t i = 0; i < n; ++i)
    if (keep(rng)) {
      idx.push_back(static_cast<std::uint32_t>(i));
      val.push_back(static_cast<float>(i % 7) + 1.0f);
    }
  return SparseStream::sparse(n, std::move(idx), std::move(val));
}

void BM_StreamMerge(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const double density = static_cast<double>(state.range(1)) / 1000.0;
  const SparseStream a = random_stream(n, density, 1), b = random_stream(n, density, 2);
  for (auto _ : state) {
    SparseStream s = sum(a, b);
    benchmark::DoNotOptimize(s.values().data());
  }
  state.counters["density"] = density;
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>((a.nnz() + b.nnz()) * 8));
}
BENCHMARK(BM_StreamMerge)
    ->ArgsProduct({{k1M, k16M}, {1, 10, 100}})  // density in per mille
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sparq::bench
