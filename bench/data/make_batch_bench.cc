// make_batch on a shuffled epoch of 1M records (data/synth's size, 160 MB):
// each batch reads its records at random. Records in a plain vector (4 KiB
// pages) against RecordSet's (huge pages); "cold" sweeps 256 MiB of other
// memory before each batch, as a training step does between two batches,
// so the page-table entries and records are no longer cached.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "sparq/data/dataset.h"
#include "sparq/core/rng.h"

namespace sparq::bench {
namespace {

constexpr std::size_t kRecords = 1'000'000;

std::vector<CriteoRecord> records() {
  std::vector<CriteoRecord> v(kRecords);
  Rng rng(1, 2);
  for (CriteoRecord& r : v) {
    r.label = static_cast<float>(rng.below(2));
    for (float& x : r.dense) x = static_cast<float>(rng.uniform(0, 10));
    for (std::uint32_t& id : r.sparse) id = static_cast<std::uint32_t>(rng.below(1u << 30));
  }
  return v;
}

// range(0): batch size; range(1): 1 = other work between batches; range(2):
// 1 = only what rank 0 of 4 table-wise ranks reads (its quarter of the
// samples whole, of the others its tables' ids: every fourth table).
template <bool kHugePages>
void BM_MakeBatch(benchmark::State& state) {
  static const std::vector<CriteoRecord> plain = records();
  static const RecordSet huge{plain};
  const std::span<const CriteoRecord> recs = kHugePages ? huge.records() : std::span(plain);
  const auto batch = static_cast<std::size_t>(state.range(0));
  const bool cold = state.range(1) != 0;
  const std::vector<std::size_t> rows(kCriteoSparse, 100000);
  BatchPlan plan(recs.size(), {.batch = batch, .seed = 3});
  BatchPart part{0, batch / 4, std::vector<bool>(kCriteoSparse)};
  for (std::size_t t = 0; t < kCriteoSparse; t += 4) part.tables[t] = true;
  const BatchPart* read = state.range(2) != 0 ? &part : nullptr;
  std::vector<char> other(cold ? std::size_t{256} << 20 : 0, 1);
  Batch out;
  std::size_t i = 0;
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      std::memset(other.data(), static_cast<int>(i & 0x7f), other.size());
      benchmark::ClobberMemory();
      state.ResumeTiming();
    }
    plan.fill(i++ % plan.num_batches(), recs, rows, out, read);
    benchmark::DoNotOptimize(out.sparse.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(batch));
}
BENCHMARK(BM_MakeBatch<false>)->Name("BM_MakeBatch/pages:4KiB")->ArgsProduct({{2048}, {0, 1}, {0, 1}})
    ->ArgNames({"batch", "cold", "part"})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MakeBatch<true>)->Name("BM_MakeBatch/pages:huge")->ArgsProduct({{2048}, {0, 1}, {0, 1}})
    ->ArgNames({"batch", "cold", "part"})->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace sparq::bench
