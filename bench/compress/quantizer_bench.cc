// Quantizers: row-wise quantize / dequantize at 8, 4, 2 bits and QSGD at 4
// bits. Bytes are always the float side (4 per value): read by quantize,
// written by dequantize, so the rows compare directly with memcpy.
#include <benchmark/benchmark.h>

#include "bench/bench_data.h"
#include "sparq/compress/qsgd.h"
#include "sparq/compress/rowwise_quant.h"

namespace sparq::bench {
namespace {

using namespace sparq::compress;

// Rows of 128 values with fp32 scales: a gradient's segments. The short
// rows are the table-wise alltoalls' (`--emb-row-len`'s default 32, fp16
// scale and bias), where the per-row work (range, grid, header, a row
// shorter than a vector group) dominates.
constexpr std::size_t kCols = 128, kShortCols = 32;

void set_bytes(benchmark::State& state, std::size_t n) {
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(n * sizeof(float)));
}

void quantize(benchmark::State& state, std::size_t cols, ScaleType scale) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const RowwiseFormat fmt{.bits = static_cast<int>(state.range(1)), .scale = scale};
  const std::vector<float> x = normal_floats(n);
  std::vector<std::byte> wire(RowwiseLayout{cols, fmt}.bytes(n / cols));
  for (auto _ : state) {
    rowwise_quantize(x, cols, fmt, wire);
    benchmark::DoNotOptimize(wire.data());
  }
  set_bytes(state, n);
}

void dequantize(benchmark::State& state, std::size_t cols, ScaleType scale) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const RowwiseFormat fmt{.bits = static_cast<int>(state.range(1)), .scale = scale};
  const std::vector<float> x = normal_floats(n);
  std::vector<std::byte> wire(RowwiseLayout{cols, fmt}.bytes(n / cols));
  rowwise_quantize(x, cols, fmt, wire);
  std::vector<float> out(n);
  for (auto _ : state) {
    rowwise_dequantize(wire, cols, fmt, out);
    benchmark::DoNotOptimize(out.data());
  }
  set_bytes(state, n);
}

void BM_RowwiseQuantize(benchmark::State& state) { quantize(state, kCols, ScaleType::F32); }
void BM_RowwiseDequantize(benchmark::State& state) { dequantize(state, kCols, ScaleType::F32); }
void BM_RowwiseQuantizeShortRows(benchmark::State& state) { quantize(state, kShortCols, ScaleType::F16); }
void BM_RowwiseDequantizeShortRows(benchmark::State& state) { dequantize(state, kShortCols, ScaleType::F16); }

void size_bit_args(benchmark::internal::Benchmark* b) {
  for (int bits : {8, 4, 2})
    for (std::int64_t n : {k1M, k16M}) b->Args({n, bits});
  b->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_RowwiseQuantize)->Apply(size_bit_args);
BENCHMARK(BM_RowwiseDequantize)->Apply(size_bit_args);
BENCHMARK(BM_RowwiseQuantizeShortRows)->Args({k1M, 8})->Args({k1M, 4})->Args({k1M, 2})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RowwiseDequantizeShortRows)->Args({k1M, 8})->Args({k1M, 4})->Args({k1M, 2})->Unit(benchmark::kMillisecond);

void BM_QsgdQuantize(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const QsgdOptions opts{.bits = 4};
  const std::vector<float> x = normal_floats(n);
  std::vector<std::byte> wire(qsgd_bytes(n, opts));
  std::uint64_t step = 0;
  for (auto _ : state) {
    qsgd_quantize(x, opts, step++, 7, wire);
    benchmark::DoNotOptimize(wire.data());
  }
  set_bytes(state, n);
}
BENCHMARK(BM_QsgdQuantize)->Arg(k1M)->Arg(k16M)->Unit(benchmark::kMillisecond);

void BM_QsgdDequantize(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const QsgdOptions opts{.bits = 4};
  const std::vector<float> x = normal_floats(n);
  std::vector<std::byte> wire(qsgd_bytes(n, opts));
  qsgd_quantize(x, opts, 0, 7, wire);
  std::vector<float> out(n);
  for (auto _ : state) {
    qsgd_dequantize(wire, opts, out);
    benchmark::DoNotOptimize(out.data());
  }
  set_bytes(state, n);
}
BENCHMARK(BM_QsgdDequantize)->Arg(k1M)->Arg(k16M)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sparq::bench
