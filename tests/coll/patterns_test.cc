// The peer/offset arithmetic of each pattern, checked without communication.
#include <gtest/gtest.h>

#include <set>

#include "sparq/coll/patterns.h"

namespace sparq::pattern {
namespace {

TEST(Partition, CoversEveryElementOnce) {
  for (std::size_t count : {0ul, 1ul, 5ul, 7ul, 64ul, 1001ul})
    for (int parts : {1, 2, 3, 4, 7, 16}) {
      const Partition p{count, parts};
      std::size_t next = 0, max_len = 0;
      for (int i = 0; i < parts; ++i) {
        EXPECT_EQ(p.offset(i), next);
        next += p.len(i);
        max_len = std::max(max_len, p.len(i));
        EXPECT_LE(p.len(0) - p.len(i), 1u);  // balanced
      }
      EXPECT_EQ(next, count);
      EXPECT_EQ(p.offset(parts), count);
      EXPECT_EQ(p.max_len(), max_len);
    }
}

// In each ring phase a rank receives every chunk but one, exactly once; the
// chunk it receives at step s is the one it sends
// at step s+1 (reduce-scatter), and it ends holding chunk r.
TEST(Ring, ReduceScatterSchedule) {
  for (int p : {2, 3, 4, 5, 8, 16})
    for (int r = 0; r < p; ++r) {
      std::set<int> got;
      for (int s = 0; s + 1 < p; ++s) {
        got.insert(ring_rs_recv_chunk(r, p, s));
        // What I receive at step s is what my left neighbour sends at step s.
        EXPECT_EQ(ring_rs_recv_chunk(r, p, s), ring_rs_send_chunk(mod(r - 1, p), p, s));
        if (s + 2 < p) {
          EXPECT_EQ(ring_rs_send_chunk(r, p, s + 1), ring_rs_recv_chunk(r, p, s));
        }
      }
      EXPECT_EQ(got.size(), static_cast<std::size_t>(p - 1));
      EXPECT_FALSE(got.count(ring_rs_send_chunk(r, p, 0)));
      EXPECT_EQ(ring_rs_recv_chunk(r, p, p - 2), r);  // owns chunk r at the end
    }
}

TEST(Ring, AllgatherSchedule) {
  for (int p : {2, 3, 4, 5, 8, 16})
    for (int r = 0; r < p; ++r) {
      std::set<int> got{r};
      EXPECT_EQ(ring_ag_send_chunk(r, p, 0), r);  // starts from its own chunk
      for (int s = 0; s + 1 < p; ++s) {
        got.insert(ring_ag_recv_chunk(r, p, s));
        EXPECT_EQ(ring_ag_recv_chunk(r, p, s), ring_ag_send_chunk(mod(r - 1, p), p, s));
        if (s + 2 < p) {
          EXPECT_EQ(ring_ag_send_chunk(r, p, s + 1), ring_ag_recv_chunk(r, p, s));
        }
      }
      EXPECT_EQ(got.size(), static_cast<std::size_t>(p));
    }
}

TEST(Fold, MapsOntoAPowerOfTwoGroup) {
  for (int p = 1; p <= 40; ++p) {
    const Fold f(p);
    EXPECT_EQ(f.pof2 & (f.pof2 - 1), 0);
    EXPECT_LE(f.pof2, p);
    EXPECT_GT(2 * f.pof2, p);
    std::set<int> new_ranks;
    for (int r = 0; r < p; ++r) {
      const int nr = f.new_rank(r);
      if (nr < 0) {
        EXPECT_LT(r, 2 * f.rem);
        EXPECT_EQ(r % 2, 0);  // the even one of a pair sits out
        continue;
      }
      EXPECT_TRUE(new_ranks.insert(nr).second);
      EXPECT_EQ(f.real_rank(nr), r);
    }
    EXPECT_EQ(new_ranks.size(), static_cast<std::size_t>(f.pof2));
    EXPECT_EQ(*new_ranks.rbegin(), f.pof2 - 1);
  }
}

TEST(Halving, PartnersAgreeAndEndOnOwnBlock) {
  for (int pof2 : {1, 2, 4, 8, 16, 32}) {
    std::vector<Window> w(pof2, Window{0, pof2});
    for (int mask = pof2 / 2; mask >= 1; mask >>= 1) {
      std::vector<Window> next(pof2);
      for (int nr = 0; nr < pof2; ++nr) {
        const auto [keep, give] = halve(w[nr], nr, mask);
        const auto [pkeep, pgive] = halve(w[nr ^ mask], nr ^ mask, mask);
        EXPECT_EQ(give, pkeep);  // I send what my partner keeps
        EXPECT_EQ(keep, pgive);
        next[nr] = keep;
      }
      w = next;
    }
    for (int nr = 0; nr < pof2; ++nr) EXPECT_EQ(w[nr], (Window{nr, nr + 1}));
    // Doubling back: the sibling is exactly the partner's window.
    for (int mask = 1; mask < pof2; mask <<= 1) {
      std::vector<Window> next(pof2);
      for (int nr = 0; nr < pof2; ++nr) {
        const Window other = sibling(w[nr], nr, mask);
        EXPECT_EQ(other, w[nr ^ mask]);
        next[nr] = {std::min(w[nr].lo, other.lo), std::max(w[nr].hi, other.hi)};
      }
      w = next;
    }
    for (int nr = 0; nr < pof2; ++nr) EXPECT_EQ(w[nr], (Window{0, pof2}));
  }
}

}  // namespace
}  // namespace sparq::pattern
