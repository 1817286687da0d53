#include "sparq/compress/counter_rng.h"

#include <gtest/gtest.h>

#include <vector>

namespace sparq::compress {
namespace {

// Known-answer vectors of Random123's philox4x32-10 (kat_vectors).
TEST(CounterRng, MatchesPublishedPhiloxVectors) {
  EXPECT_EQ(philox4x32({0, 0, 0, 0}, 0), (Philox4x32{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, 0xffffffffffffffffull),
            (Philox4x32{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, 0x299f31d0a4093822ull),
            (Philox4x32{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(CounterRng, BlockedUniformsEqualScalarCalls) {
  for (std::size_t blocks : {0u, 1u, 3u, 64u, 65u, 200u}) {
    std::vector<float> got(4 * blocks);
    const Philox4x32 base{1000, 7, 8, 9};
    philox_uniforms(base, 0xfeedfacecafebeefull, blocks, got.data());
    for (std::size_t b = 0; b < blocks; ++b) {
      const Philox4x32 r = philox4x32({base[0] + static_cast<std::uint32_t>(b), 7, 8, 9}, 0xfeedfacecafebeefull);
      for (std::size_t j = 0; j < 4; ++j) ASSERT_EQ(got[4 * b + j], uniform01(r[j])) << blocks << " " << b;
    }
  }
}

TEST(CounterRng, UniformIsInUnitInterval) {
  EXPECT_EQ(uniform01(0), 0.0f);
  EXPECT_LT(uniform01(0xffffffffu), 1.0f);
  EXPECT_EQ(uniform01(0x80000000u), 0.5f);
}

TEST(CounterRng, TensorIdIsFnv1a) {
  EXPECT_EQ(tensor_id(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(tensor_id("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_NE(tensor_id("fc1.weight"), tensor_id("fc1.bias"));
}

}  // namespace
}  // namespace sparq::compress
