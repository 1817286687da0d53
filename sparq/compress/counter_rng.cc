#include "sparq/compress/counter_rng.h"

#include <algorithm>

namespace sparq::compress {

void philox_uniforms(Philox4x32 ctr, std::uint64_t key, std::size_t blocks, float* out) {
  // Structure of arrays over up to kLanes blocks: each round is one loop over
  // the blocks with no dependence between them, which GCC vectorizes
  // (pmuludq for the widening multiplies).
  constexpr std::size_t kLanes = 64;
  constexpr std::uint32_t kMul0 = kPhiloxMul0, kMul1 = kPhiloxMul1, kWeyl0 = kPhiloxWeyl0, kWeyl1 = kPhiloxWeyl1;
  alignas(16) std::uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
  for (std::size_t first = 0; first < blocks; first += kLanes) {
    const std::size_t n = std::min(kLanes, blocks - first);
    for (std::size_t b = 0; b < n; ++b) {
      c0[b] = ctr[0] + static_cast<std::uint32_t>(first + b);
      c1[b] = ctr[1];
      c2[b] = ctr[2];
      c3[b] = ctr[3];
    }
    std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
    for (int round = 0; round < 10; ++round) {
      for (std::size_t b = 0; b < n; ++b) {
        const std::uint64_t p0 = static_cast<std::uint64_t>(kMul0) * c0[b];
        const std::uint64_t p1 = static_cast<std::uint64_t>(kMul1) * c2[b];
        const std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1[b] ^ k0;
        const std::uint32_t n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3[b] ^ k1;
        c1[b] = static_cast<std::uint32_t>(p1);
        c3[b] = static_cast<std::uint32_t>(p0);
        c0[b] = n0;
        c2[b] = n2;
      }
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    for (std::size_t b = 0; b < n; ++b) {
      float* o = out + 4 * (first + b);
      o[0] = uniform01(c0[b]);
      o[1] = uniform01(c1[b]);
      o[2] = uniform01(c2[b]);
      o[3] = uniform01(c3[b]);
    }
  }
}

}  // namespace sparq::compress
