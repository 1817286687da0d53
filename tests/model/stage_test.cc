// A DLRM cut into model-parallel stages and run over micro-batches computes
// what the whole model computes on the whole batch: the same logits, and
// parameter and table gradients within float summation order (micro-batches
// add their gradients in a different order than one GEMM does).
#include <gtest/gtest.h>

#include <cmath>

#include "sparq/core/error.h"
#include "tests/model/tiny.h"

namespace sparq {
namespace {

TEST(PlanStages, ParsesCutsIntoContiguousStages) {
  DlrmConfig c;  // bottom 13-512-256-64-16: 4 layers; top 367-512-256-1: 3 layers
  c.table_rows = {10, 10};
  using S = DlrmStage;
  EXPECT_EQ(plan_stages(c, ""), (std::vector<S>{{0, 4, true, 0, 3}}));
  EXPECT_EQ(plan_stages(c, "bot:2"), (std::vector<S>{{0, 2, false, 0, 0}, {2, 4, true, 0, 3}}));
  EXPECT_EQ(plan_stages(c, "top:2,bot:2"),
            (std::vector<S>{{0, 2, false, 0, 0}, {2, 4, true, 0, 2}, {4, 4, false, 2, 3}}));
  EXPECT_EQ(plan_stages(c, "bot:4,top:0"),
            (std::vector<S>{{0, 4, false, 0, 0}, {4, 4, true, 0, 0}, {4, 4, false, 0, 3}}));
  for (const char* bad : {"bot:0", "bot:5", "top:3", "mid:1", "bot:2,bot:2", "bot:x", "bot", "bot:2,", ":2"})
    EXPECT_THROW(plan_stages(c, bad), InputError) << bad;
}

// Runs the chain of stages over M micro-batches as a pipeline would (all
// forwards, then the backwards in reverse), with the loss gradient of the
// whole batch's mean.
struct Chain {
  std::vector<std::unique_ptr<Dlrm<double>>> stages;
  std::vector<double> logits;

  Chain(const DlrmConfig& cfg, const std::string& splits) {
    for (const auto& s : plan_stages(cfg, splits)) {
      stages.push_back(std::make_unique<Dlrm<double>>(cfg, 5, s));
      test::liven(*stages.back());
    }
  }

  void step(const Batch& b, std::size_t M) {
    const std::size_t S = stages.size();
    std::vector<std::vector<std::vector<double>>> acts(M, std::vector<std::vector<double>>(S));
    for (auto& s : stages) s->stage_begin(b, M);
    logits.clear();
    for (std::size_t mb = 0; mb < M; ++mb) {
      const double* x = nullptr;
      for (std::size_t s = 0; s < S; ++s) {
        const auto y = stages[s]->stage_forward(mb, x);
        acts[mb][s].assign(y.begin(), y.end());
        x = acts[mb][s].data();
      }
      logits.insert(logits.end(), acts[mb][S - 1].begin(), acts[mb][S - 1].end());
    }
    std::size_t at = 0;
    std::vector<std::vector<double>> dlogits(M);
    for (std::size_t mb = 0; mb < M; ++mb)
      for (std::size_t i = 0; i < stages[0]->micro_size(mb); ++i, ++at)
        dlogits[mb].push_back((1 / (1 + std::exp(-logits[at])) - b.labels[at]) / static_cast<double>(b.size));
    for (std::size_t mb = M; mb-- > 0;) {
      const double* g = dlogits[mb].data();
      std::vector<double> keep;
      for (std::size_t s = S; s-- > 0;) {
        const double* dx = stages[s]->stage_backward(mb, g);
        if (s > 0) keep.assign(dx, dx + stages[s]->micro_size(mb) * stages[s]->stage_in_width()), g = keep.data();
      }
    }
    for (auto& s : stages) s->stage_end();
  }
};

TEST(Stages, MicroBatchedChainEqualsTheWholeModel) {
  const DlrmConfig cfg = test::tiny_config();  // bottom 4-8-3, top 8-6-1 (after a 9-wide interaction)
  const Batch b = test::tiny_batch();
  Dlrm<double> whole(cfg, 5);
  test::liven(whole);
  const auto z = whole.forward(b);
  const std::vector<double> want_logits(z.begin(), z.end());
  std::vector<double> dl(b.size);
  for (std::size_t i = 0; i < b.size; ++i) dl[i] = (1 / (1 + std::exp(-z[i])) - b.labels[i]) / double(b.size);
  whole.backward(dl);

  for (const char* splits : {"", "bot:1", "top:1", "bot:1,top:1", "bot:2,top:0,top:1"})
    for (std::size_t M : {1, 2, 3, 7}) {  // 7 > 5 samples: some micro-batches are empty
      SCOPED_TRACE(testing::Message() << "splits '" << splits << "', " << M << " micro-batches");
      Chain chain(cfg, splits);
      chain.step(b, M);
      ASSERT_EQ(chain.logits.size(), want_logits.size());
      for (std::size_t i = 0; i < b.size; ++i) EXPECT_NEAR(chain.logits[i], want_logits[i], 1e-12);
      std::size_t views = 0;
      for (const auto& st : chain.stages) {
        const auto& d = st->dense();
        for (std::size_t v = 0; v < d.views().size(); ++v, ++views) {
          const auto want = whole.dense().grad(whole.dense().find(d.views()[v].name));
          const auto got = d.grad(v);
          for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << d.views()[v].name;
        }
        for (std::size_t t = 0; t < st->tables().size(); ++t) {
          EXPECT_EQ(st->sparse_grad(t).rows, whole.sparse_grad(t).rows);
          for (std::size_t i = 0; i < whole.sparse_grad(t).values.size(); ++i)
            EXPECT_NEAR(st->sparse_grad(t).values[i], whole.sparse_grad(t).values[i], 1e-12);
        }
      }
      EXPECT_EQ(views, whole.dense().views().size());  // the stages hold every parameter once
    }
}

}  // namespace
}  // namespace sparq
