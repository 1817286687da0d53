#include "sparq/core/memo.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "sparq/core/rng.h"

namespace sparq {
namespace {

// The reference: what make writes, drawn afresh.
std::vector<float> drawn(std::uint64_t seed, std::size_t n) {
  std::vector<float> v(n);
  Rng rng(seed);
  for (float& x : v) x = static_cast<float>(rng.uniform());
  return v;
}

}  // namespace

TEST(Memo, EachKeyIsMadeOncePerSizeWhileAMemoLivesAndEveryCallerGetsItsBits) {
  std::atomic<int> made = 0;
  const auto fill = [&](std::uint64_t seed, std::size_t n) {
    std::vector<float> out(n, -1.0f);
    memo_fill<float>("draw " + std::to_string(seed), out, [&](std::span<float> v) {
      ++made;
      const std::vector<float> ref = drawn(seed, v.size());
      std::copy(ref.begin(), ref.end(), v.begin());
    });
    return out;
  };
  EXPECT_EQ(fill(1, 100), drawn(1, 100));  // no Memo: made each time
  EXPECT_EQ(fill(1, 100), drawn(1, 100));
  EXPECT_EQ(made, 2);
  made = 0;
  {
    const Memo memo;
    std::vector<std::thread> ranks;
    std::vector<std::vector<float>> got(8);
    for (std::size_t r = 0; r < got.size(); ++r) ranks.emplace_back([&, r] { got[r] = fill(7, 1000); });
    for (std::thread& t : ranks) t.join();
    for (const auto& g : got) EXPECT_EQ(g, drawn(7, 1000));
    EXPECT_EQ(made, 1);
    EXPECT_EQ(fill(8, 1000), drawn(8, 1000));  // another key
    EXPECT_EQ(fill(7, 10), drawn(7, 10));      // another size
    EXPECT_EQ(made, 3);
  }
  EXPECT_EQ(fill(7, 1000), drawn(7, 1000));  // the last Memo ended: made again
  EXPECT_EQ(made, 4);
}

}  // namespace sparq
