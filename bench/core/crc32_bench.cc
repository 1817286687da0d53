// The CRC-32 of checkpoint files: sparq::crc32 (carry-less folds where the
// CPU has them) against zlib's crc32_z and memcpy, over 256 KiB (in cache)
// and 168 MiB (a whole checkpoint of the default set: from memory).
#include <benchmark/benchmark.h>
#include <zlib.h>

#include <cstring>
#include <vector>

#include "sparq/core/crc32.h"

namespace sparq::bench {
namespace {

std::vector<unsigned char> bytes(std::size_t n) {
  std::vector<unsigned char> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>(i * 131 + (i >> 9));
  return v;
}

enum class Kind { Sparq, Zlib, Memcpy };

template <Kind kKind>
void BM_Crc32(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const std::vector<unsigned char> in = bytes(n);
  std::vector<unsigned char> out(kKind == Kind::Memcpy ? n : 0);
  for (auto _ : state) {
    if constexpr (kKind == Kind::Sparq) benchmark::DoNotOptimize(crc32(0, in.data(), n));
    if constexpr (kKind == Kind::Zlib) benchmark::DoNotOptimize(crc32_z(0, in.data(), n));
    if constexpr (kKind == Kind::Memcpy) {
      std::memcpy(out.data(), in.data(), n);
      benchmark::ClobberMemory();
    }
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(n));
}
BENCHMARK(BM_Crc32<Kind::Sparq>)->Name("BM_Crc32/sparq")->Arg(256 << 10)->Arg(168 << 20);
BENCHMARK(BM_Crc32<Kind::Zlib>)->Name("BM_Crc32/zlib")->Arg(256 << 10)->Arg(168 << 20);
BENCHMARK(BM_Crc32<Kind::Memcpy>)->Name("BM_Crc32/memcpy")->Arg(256 << 10)->Arg(168 << 20);

}  // namespace
}  // namespace sparq::bench
