// The model's thread pool splits work into independent items, so training
// gives bitwise the same parameters with 1, 2 or 3 compute threads.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "sparq/model/loss.h"
#include "sparq/model/optimizer.h"
#include "sparq/core/parallel_clock.h"
#include "sparq/model/parallel.h"
#include "tests/model/tiny.h"

namespace sparq {
namespace {

TEST(Parallel, CoversEveryItemOnce) {
  for (int threads : {1, 2, 3, 5}) {
    set_compute_threads(threads);
    for (std::size_t n : {0, 1, 2, 7, 1000})
      for (std::size_t grain : {1, 3, 100}) {
        std::vector<std::atomic<int>> hits(n);
        parallel_for(n, grain, [&](std::size_t a, std::size_t b) {
          for (std::size_t i = a; i < b; ++i) hits[i]++;
        });
        for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " " << n << " " << grain;
      }
  }
  set_compute_threads(1);
}

TEST(Parallel, ExceptionInAPartReachesTheCaller) {
  set_compute_threads(3);
  for (std::size_t bad : {0, 500, 999}) {
    std::atomic<int> done{0};
    EXPECT_THROW(parallel_for(1000, 1,
                              [&](std::size_t a, std::size_t b) {
                                for (std::size_t i = a; i < b; ++i) {
                                  if (i == bad) throw std::runtime_error("bad item");
                                  ++done;
                                }
                              }),
                 std::runtime_error);
  }
  // The pool is usable afterwards.
  std::atomic<int> n{0};
  parallel_for(100, 1, [&](std::size_t a, std::size_t b) { n += static_cast<int>(b - a); });
  EXPECT_EQ(n.load(), 100);
  set_compute_threads(1);
}

TEST(Parallel, ConcurrentCallersRunInline) {
  set_compute_threads(2);
  std::vector<std::thread> ts;
  std::atomic<long> sum{0};
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&] {
      for (int rep = 0; rep < 200; ++rep)
        parallel_for(1000, 1, [&](std::size_t a, std::size_t b) { sum += static_cast<long>(b - a); });
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(sum.load(), 4L * 200 * 1000);
  set_compute_threads(1);
}

std::vector<float> train_params(int threads, std::size_t batch_seed_base) {
  set_compute_threads(threads);
  DlrmConfig cfg = test::tiny_config();
  cfg.bot_mlp = {4, 40, 3};
  Dlrm<float> m(cfg, 3);
  Optimizer<float> opt({.lr = 0.1, .embedding = EmbeddingOptim::RowwiseAdagrad}, m);
  for (std::size_t s = 0; s < 4; ++s) {
    // A batch big enough that every parallel_for splits (64 samples).
    Batch b = test::tiny_batch(batch_seed_base + s);
    Batch big = b;
    for (int rep = 1; rep < 13; ++rep) {
      big.dense.insert(big.dense.end(), b.dense.begin(), b.dense.end());
      big.labels.insert(big.labels.end(), b.labels.begin(), b.labels.end());
      for (std::size_t t = 0; t < b.sparse.size(); ++t) {
        auto& o = big.sparse[t];
        const auto base = o.indices.size();
        o.indices.insert(o.indices.end(), b.sparse[t].indices.begin(), b.sparse[t].indices.end());
        for (std::size_t k = 1; k < b.sparse[t].offsets.size(); ++k)
          o.offsets.push_back(static_cast<std::uint32_t>(base + b.sparse[t].offsets[k]));
      }
    }
    big.size = b.size * 13;
    auto z = m.forward(big);
    std::vector<float> dz(big.size);
    bce_with_logits<float>(z, big.labels, dz);
    m.backward(dz);
    opt.step();
  }
  std::vector<float> out(m.dense().params().begin(), m.dense().params().end());
  for (auto& t : m.tables()) out.insert(out.end(), t.weights().begin(), t.weights().end());
  set_compute_threads(1);
  return out;
}

TEST(Parallel, TrainingIsBitwiseIndependentOfThreads) {
  const auto one = train_params(1, 0);
  for (int t : {2, 3}) {
    const auto many = train_params(t, 0);
    ASSERT_EQ(one.size(), many.size());
    EXPECT_EQ(std::memcmp(one.data(), many.data(), one.size() * sizeof(float)), 0) << t << " threads";
  }
}

// A rank on the virtual clock with T threads: parallel_for runs the parts the
// pool would, in turn on the calling thread, inside one section of its clock
// (a nested call runs inline, inside the part); the GEMMs split too.
struct RecordingClock final : ParallelClock {
  int begins = 0;
  std::vector<std::size_t> parts;
  void begin_parallel() override { ++begins; }
  void end_parallel(std::span<const double> cpu) override {
    parts.push_back(cpu.size());
    for (double c : cpu) EXPECT_GE(c, 0);
  }
};

TEST(Parallel, EmulatedThreadsRunThePartsInTurnInsideOneSection) {
  set_compute_threads(1);
  RecordingClock clock;
  set_emulated_threads({3, &clock});
  const auto caller = std::this_thread::get_id();
  std::vector<int> hits(1000);
  parallel_for(1000, 10, [&](std::size_t a, std::size_t b) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    parallel_for(b - a, 1, [&](std::size_t c, std::size_t d) {  // nested: inline, in this part
      for (std::size_t i = a + c; i < a + d; ++i) hits[i]++;
    });
  });
  parallel_for(20, 10, [&](std::size_t a, std::size_t b) {  // two parts only: 20 items of grain 10
    for (std::size_t i = a; i < b; ++i) hits[i]++;
  });
  set_emulated_threads({});
  EXPECT_EQ(clock.begins, 2);
  EXPECT_EQ(clock.parts, (std::vector<std::size_t>{3, 2}));
  for (std::size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i], i < 20 ? 2 : 1) << i;
}

TEST(Parallel, EmulatedThreadsTrainBitwiseAsOneThread) {
  const auto one = train_params(1, 0);
  RecordingClock clock;
  set_emulated_threads({3, &clock});
  const auto emulated = train_params(1, 0);
  set_emulated_threads({});
  EXPECT_GT(clock.begins, 0);
  ASSERT_EQ(one.size(), emulated.size());
  EXPECT_EQ(std::memcmp(one.data(), emulated.data(), one.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace sparq
