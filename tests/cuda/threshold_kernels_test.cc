// sparq/cuda/threshold_pack.cu itself, run on the host under
// tests/cuda/simt.h through its C entry points: the pairs in index order,
// their count and the residual against the CPU's threshold-pack
// (compress/threshold_pack.h), bit for bit, on aligned and misaligned
// tensors (the float4 and the scalar paths) and lengths that end inside a
// thread's 16 values and a block's 4096; NaN flags its block.
#include "tests/cuda/simt.h"
// clang-format off: the kernels after the emulation they compile against
#include "sparq/cuda/threshold_pack.cu"
// clang-format on

#include <gtest/gtest.h>

#include <random>

#include "sparq/compress/threshold_pack.h"

namespace sparq {
namespace {

struct Packed {
  std::vector<std::uint32_t> idx;
  std::vector<float> val;
  std::vector<std::int8_t> faults;
};

// The two kernels and, between them, the cumulative sum torch makes.
Packed pack(const float* g, float* e, float tau, std::int64_t n) {
  const std::int64_t block = sparq_cuda_pack_block(), blocks = std::max<std::int64_t>(1, (n + block - 1) / block);
  std::vector<std::int32_t> stage_idx(blocks * block), counts(blocks, 0), ends(blocks), out_idx(n);
  std::vector<float> stage_val(blocks * block), out_val(n);
  Packed p;
  p.faults.assign(blocks, 0);
  EXPECT_EQ(sparq_cuda_select_pairs(g, e, tau, n, stage_idx.data(), stage_val.data(), counts.data(), p.faults.data(),
                                    nullptr),
            0);
  std::int32_t sum = 0;
  for (std::int64_t b = 0; b < blocks; ++b) ends[b] = sum += counts[b];
  EXPECT_EQ(sparq_cuda_move_pairs(stage_idx.data(), stage_val.data(), counts.data(), ends.data(), n ? blocks : 0,
                                  out_idx.data(), out_val.data(), nullptr),
            0);
  p.idx.assign(out_idx.begin(), out_idx.begin() + sum);
  p.val.assign(out_val.begin(), out_val.begin() + sum);
  return p;
}

bool same_bits(const float* a, const float* b, std::size_t n) {
  return n == 0 || std::memcmp(a, b, n * sizeof(float)) == 0;
}

TEST(CudaThresholdKernels, PackAsTheCpuInIndexOrder) {
  std::mt19937 gen(11);
  std::normal_distribution<float> normal;
  for (std::size_t n : {std::size_t{20011}, std::size_t{4096}, std::size_t{37}, std::size_t{0}}) {
    // One float in front: the tensors' starts then are not 16-byte aligned.
    for (std::size_t shift : {0, 1}) {
      std::vector<float> gbuf(n + 4), ebuf(n + 4);
      for (float& v : gbuf) v = normal(gen);
      for (float& v : ebuf) v = normal(gen) * 0.5f;
      const std::span<const float> g(gbuf.data() + shift, n);
      const float tau = 1.9f;  // keeps a few percent, as DCT-DP does
      std::vector<std::uint32_t> want_idx(n);
      std::vector<float> want_val(n);
      SCOPED_TRACE(testing::Message() << n << " values, shift " << shift);

      const std::size_t k = compress::threshold_pack(g, tau, want_idx, want_val);
      const Packed plain = pack(g.data(), nullptr, tau, static_cast<std::int64_t>(n));
      ASSERT_EQ(plain.idx, std::vector<std::uint32_t>(want_idx.begin(), want_idx.begin() + k));
      ASSERT_TRUE(same_bits(plain.val.data(), want_val.data(), k));

      std::vector<float> want_err(ebuf.begin() + shift, ebuf.begin() + shift + n);
      const std::size_t kf = compress::feedback_threshold_pack(g, want_err, tau, want_idx, want_val);
      const Packed fb = pack(g.data(), ebuf.data() + shift, tau, static_cast<std::int64_t>(n));
      ASSERT_EQ(fb.idx, std::vector<std::uint32_t>(want_idx.begin(), want_idx.begin() + kf));
      ASSERT_TRUE(same_bits(fb.val.data(), want_val.data(), kf));
      ASSERT_TRUE(same_bits(ebuf.data() + shift, want_err.data(), n));
      if (n > 1000) {
        EXPECT_GT(kf, n / 100);
      }
      for (std::int8_t f : fb.faults) EXPECT_EQ(f, 0);
    }
  }
}

TEST(CudaThresholdKernels, NanFlagsItsBlock) {
  std::vector<float> g(3 * 4096 + 5, 1.0f), e(g.size(), 0.0f);
  g[4096 + 17] = NAN;
  g[2 * 4096 + 100] = INFINITY;
  const Packed p = pack(g.data(), e.data(), 0.5f, static_cast<std::int64_t>(g.size()));
  EXPECT_EQ(p.faults, (std::vector<std::int8_t>{0, 1, 1, 0}));
}

}  // namespace
}  // namespace sparq
