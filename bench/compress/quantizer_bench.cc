// Quantizers: row-wise quantize / dequantize at 8, 4, 2 bits and QSGD at 4
// bits. Bytes are always the float side (4 per value): read by quantize,
// written by dequantize, so the rows compare directly with memcpy.
#include <benchmark/benchmark.h>

#include "bench/compress/bench_data.h"
#include "sparq/compress/qsgd.h"
#include "sparq/compress/rowwise_quant.h"

namespace sparq::bench {
namespace {

using namespace sparq::compress;

// Arguments: values, bits, row length, and 1 for fp16 scales. Rows of 128
// with fp32 scales are a gradient's segments; rows of 32 with fp16 scales
// are the table-wise alltoalls' (`--emb-row-len`'s default), where the
// per-row work (range, grid, header, a short row's tail) dominates.
RowwiseFormat format_of(const benchmark::State& state) {
  return {.bits = static_cast<int>(state.range(1)),
          .scale = state.range(3) ? ScaleType::F16 : ScaleType::F32};
}

void set_bytes(benchmark::State& state, std::size_t n) {
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(n * sizeof(float)));
}

void BM_RowwiseQuantize(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0)), cols = static_cast<std::size_t>(state.range(2));
  const RowwiseFormat fmt = format_of(state);
  const std::vector<float> x = normal_floats(n);
  std::vector<std::byte> wire(RowwiseLayout{cols, fmt}.bytes(n / cols));
  for (auto _ : state) {
    rowwise_quantize(x, cols, fmt, wire);
    benchmark::DoNotOptimize(wire.data());
  }
  set_bytes(state, n);
}

void BM_RowwiseDequantize(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0)), cols = static_cast<std::size_t>(state.range(2));
  const RowwiseFormat fmt = format_of(state);
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

void size_bit_args(benchmark::internal::Benchmark* b) {
  for (int bits : {8, 4, 2}) {
    for (std::int64_t n : {k1M, k16M}) b->Args({n, bits, 128, 0});
    b->Args({k1M, bits, 32, 1});
  }
  b->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_RowwiseQuantize)->Apply(size_bit_args);
BENCHMARK(BM_RowwiseDequantize)->Apply(size_bit_args);

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
