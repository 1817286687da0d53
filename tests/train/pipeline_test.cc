// Model parallelism against single-rank training: with --mp-codec none, a 2-
// and a 3-stage pipeline over micro-batches end with the parameters of one
// rank training the whole model (summation-order tolerance: micro-batches
// accumulate gradients in another order); DCT-MP sends what it promises.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <tuple>

#include "sparq/compress/half.h"
#include "sparq/model/blas.h"
#include "sparq/model/loss.h"
#include "sparq/train/hybrid.h"
#include "sparq/train/pipeline.h"
#include "tests/support/ranks.h"
#include "tests/train/fixtures.h"

namespace sparq {
namespace {

DlrmConfig config() {
  DlrmConfig c;
  c.bot_mlp = {5, 64, 16, 8};
  c.top_mlp = {16, 8, 1};
  c.emb_dim = 8;
  c.table_rows = {50, 7, 200};
  return c;
}

Batch make_batch(const DlrmConfig& c, std::uint64_t step, std::size_t n) { return test::make_batch(c, step, 0, n); }

TEST(MpCodec, Parses) {
  SPARQ_LOCAL_ONLY();
  EXPECT_EQ(parse_mp_codec("none").kind, MpCodec::Kind::None);
  EXPECT_DOUBLE_EQ(parse_mp_codec("dct:0.95").eta, 0.95);
  EXPECT_EQ(parse_mp_codec("topk-grad:0.9").kind, MpCodec::Kind::TopkGrad);
  EXPECT_EQ(parse_mp_codec("sketch:0.5").kind, MpCodec::Kind::Sketch);
  const MpCodec opts = parse_mp_codec("dct:0.9+bf16,l1=0.002,grad=dense");
  EXPECT_DOUBLE_EQ(opts.eta, 0.9);
  EXPECT_EQ(opts.values, compress::ValueFormat::Bf16);
  EXPECT_DOUBLE_EQ(opts.drop_l1, 0.002);
  EXPECT_TRUE(opts.dense_grad);
  EXPECT_FALSE(parse_mp_codec("dct:0.9").dense_grad);
  for (const char* bad : {"dct", "dct:1", "dct:-0.1", "dct:0.9x", "topk-grad:", "sketch:2", "gzip", "dct:0.9,",
                          "dct:0.9,l1=-1", "dct:0.9,l1=inf", "dct:0.9,l1=", "dct:0.9,grad=sparse", "dct:0.9,,l1=1",
                          "topk-grad:0.9,grad=dense", "sketch:0.5,l1=1", "topk-grad:0.9+bf16", "dct:0.9+fp8",
                          "dct:0.9,l1=1+bf16"})
    EXPECT_THROW(parse_mp_codec(bad), InputError) << bad;
}

constexpr std::size_t kSteps = 50, kBatch = 20;

// One rank training the whole model for kSteps on batches of `batch`.
std::unique_ptr<Dlrm<float>> train_single(const DlrmConfig& cfg, std::size_t batch) {
  return test::train_single(cfg, 3, kSteps, [&](std::size_t k) { return make_batch(cfg, k, batch); });
}

// Largest difference between a stage's parameters and the whole model's.
double stage_vs_whole(Dlrm<float>& stage, Dlrm<float>& whole) {
  double worst = 0;
  const auto& d = stage.dense();
  for (std::size_t v = 0; v < d.views().size(); ++v) {
    const auto want = whole.dense().param(whole.dense().find(d.views()[v].name));
    const auto got = d.param(v);
    for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, double(std::abs(got[i] - want[i])));
  }
  for (std::size_t tb = 0; tb < stage.tables().size(); ++tb)
    for (std::size_t i = 0; i < stage.tables()[tb].weights().size(); ++i)
      worst = std::max(worst, double(std::abs(stage.tables()[tb].weights()[i] - whole.tables()[tb].weights()[i])));
  return worst;
}

TEST(Pipeline, EqualsSingleRankTraining) {
  set_blas_threads(1);
  const DlrmConfig cfg = config();
  const std::size_t steps = kSteps, B = kBatch;
  OptimizerOptions oo;
  oo.lr = 0.1;
  const auto single_model = train_single(cfg, B);
  Dlrm<float>& single = *single_model;
  for (const char* splits : {"bot:2", "bot:1,top:1"})
    for (std::size_t micro : {1, 3}) {
      const auto plan = plan_stages(cfg, splits);
      const int p = static_cast<int>(plan.size());
      if (!test::ranks_available(p)) continue;
      SCOPED_TRACE(testing::Message() << splits << ", " << micro << " micro-batches");
      test::run_ranks(p, [&](Transport& t) {
        Dlrm<float> stage(cfg, 3, plan[t.rank()]);
        Optimizer<float> opt(oo, stage);
        Pipeline pipe(t, stage, opt, micro, parse_mp_codec("none"));
        double loss = 0;
        for (std::size_t k = 0; k < steps; ++k) loss = pipe.step(make_batch(cfg, k, B), k).loss_sum;
        EXPECT_EQ(loss > 0, t.rank() + 1 == p);  // the last stage computes the loss
        EXPECT_LT(stage_vs_whole(stage, single), 1e-5) << "stage " << t.rank();
        // predict() runs the whole pipeline forward: the single model's logits.
        const Batch test = make_batch(cfg, 1000, 9);
        const auto z = pipe.predict(test);
        if (t.rank() + 1 == p) {
          const auto want = single.forward(test);
          ASSERT_EQ(z.size(), want.size());
          for (std::size_t i = 0; i < z.size(); ++i) EXPECT_NEAR(z[i], want[i], 1e-4);
        } else {
          EXPECT_TRUE(z.empty());
        }
      });
    }
}

// Hybrid: D replicas of an M-stage pipeline, each on its share of the global
// batch (21 samples: uneven shares), the stages' gradients averaged over the
// replicas: with every codec off, the whole model of one rank at the global batch.
TEST(Hybrid, EqualsSingleRankTraining) {
  set_blas_threads(1);
  const DlrmConfig cfg = config();
  const std::size_t B = kBatch + 1;
  const auto single =
      test::train_single(cfg, 3, kSteps, [&](std::size_t k) { return make_batch(cfg, k, k + 1 == kSteps ? 2 : B); });
  for (const auto& [splits, d] : {std::pair{"bot:2", 2}, std::pair{"top:1", 2}, std::pair{"bot:2", 3}}) {
    const auto plan = plan_stages(cfg, splits);
    const int p = static_cast<int>(plan.size()) * d;
    if (!test::ranks_available(p)) continue;
    SCOPED_TRACE(testing::Message() << splits << " x " << d << " replicas");
    test::run_ranks(p, [&](Transport& t) {
      Dlrm<float> stage(cfg, 3, plan[t.rank() % plan.size()]);
      Optimizer<float> opt({.lr = 0.1}, stage);
      compress::ErrorFeedbackStore store;
      Hybrid hy(t, plan.size(), stage, opt, 2, parse_mp_codec("none"), {.codec = parse_dp_codec("none")}, store);
      EXPECT_EQ(hy.replicas(), static_cast<std::size_t>(d));
      // The last batch has 2 samples: with 3 replicas one of them gets none.
      for (std::size_t k = 0; k < kSteps; ++k) hy.step(make_batch(cfg, k, k + 1 == kSteps ? 2 : B), k);
      hy.verify(kSteps);
      EXPECT_LT(stage_vs_whole(stage, *single), 1e-5) << "rank " << t.rank();
    });
  }
}

// The same with table-wise tables: the middle stage's replicas own the
// tables between them and trade lookups and their gradients by alltoall;
// once gathered, replica 0's middle stage holds the single rank's tables,
// and predict() gives its logits.
TEST(Hybrid, TableWiseEqualsSingleRankTraining) {
  set_blas_threads(1);
  const DlrmConfig cfg = config();
  const std::size_t B = kBatch + 1;
  const auto single =
      test::train_single(cfg, 3, kSteps, [&](std::size_t k) { return make_batch(cfg, k, k + 1 == kSteps ? 2 : B); });
  for (const auto& [splits, d, micro] :
       {std::tuple{"bot:2", 2, 1}, std::tuple{"bot:2", 2, 3}, std::tuple{"top:1", 3, 2}, std::tuple{"bot:1,top:1", 2, 2}}) {
    const auto plan = plan_stages(cfg, splits);
    const int p = static_cast<int>(plan.size()) * d;
    if (!test::ranks_available(p)) continue;
    SCOPED_TRACE(testing::Message() << splits << " x " << d << " replicas, " << micro << " micro-batches");
    test::run_ranks(p, [&](Transport& t) {
      Dlrm<float> stage(cfg, 3, plan[t.rank() % plan.size()]);
      Optimizer<float> opt({.lr = 0.1}, stage);
      compress::ErrorFeedbackStore store;
      DataParallelOptions dp{.codec = parse_dp_codec("none"), .placement = EmbPlacement::TableWise};
      Hybrid hy(t, plan.size(), stage, opt, micro, parse_mp_codec("none"), dp, store);
      HybridStepStats st;
      for (std::size_t k = 0; k < kSteps; ++k) st = hy.step(make_batch(cfg, k, k + 1 == kSteps ? 2 : B), k);
      hy.verify(kSteps);
      EXPECT_EQ(st.emb_grad.bytes_sent, 0u);  // no table is averaged
      if (stage.stage().middle) {
        EXPECT_GT(st.emb_fwd.values, 0u);
      }
      hy.gather_tables();
      const int replica = t.rank() / static_cast<int>(plan.size());
      if (replica == 0) {
        EXPECT_LT(stage_vs_whole(stage, *single), 1e-5) << "rank " << t.rank();
      }
      const Batch test = make_batch(cfg, 1000, 9);
      const auto z = hy.predict(test);
      if (t.rank() + 1 == static_cast<int>(plan.size())) {
        const auto want = single->forward(test);
        ASSERT_EQ(z.size(), want.size());
        for (std::size_t i = 0; i < z.size(); ++i) EXPECT_NEAR(z[i], want[i], 1e-4);
      }
    });
  }
}

// DCT-MP at 95% on a 64-wide cut keeps ceil(0.05 * 64) = 4 values a sample:
// 16 bytes of values + 8 of mask forward (10.7x less than fp32), 16 bytes
// back (16x); training still moves the loss like the dense pipeline.
TEST(Pipeline, DctMpCompressesActivationsAndGradients) {
  set_blas_threads(1);
  SPARQ_NEED_RANKS(2);
  const DlrmConfig cfg = config();
  test::run_ranks(2, [&](Transport& t) {
    const auto plan = plan_stages(cfg, "bot:1");  // the activation is 64 wide
    Dlrm<float> stage(cfg, 3, plan[t.rank()]);
    Optimizer<float> opt({.lr = 0.1}, stage);
    Pipeline pipe(t, stage, opt, 2, parse_mp_codec("dct:0.95"));
    ExchangeStats act, grad;
    for (std::size_t k = 0; k < 10; ++k) {
      const auto s = pipe.step(make_batch(cfg, k, 20), k);
      act += s.x_act;
      grad += s.x_grad;
    }
    if (t.rank() == 0) {
      EXPECT_EQ(act.dense_bytes, 10u * 20 * 64 * 4);
      EXPECT_EQ(act.bytes_sent, 10u * 20 * (4 * 4 + 8));
      EXPECT_EQ(act.kept, 10u * 20 * 4);
      EXPECT_EQ(grad.bytes_sent, 0u);
    } else {
      EXPECT_EQ(grad.bytes_sent, 10u * 20 * 4 * 4);
      EXPECT_EQ(grad.dense_bytes, 10u * 20 * 64 * 4);
      EXPECT_EQ(act.bytes_sent, 0u);
    }
  });
}

// DCT-MP's cut written out on one thread: per sample the `keep` largest
// |X_act| cross forward (ties to the lower column), and X_grad comes back
// under the forward mask (DCT-MP) or, with `grad_mask` false, whole.
// `drop_l1` adds the gradient of drop_l1 times the batch's mean over samples
// of the summed dropped activations (all >= 0 after the ReLU); `bf16` rounds
// what crosses, both ways, to bfloat16. Both stages of a 2-stage plan train
// for `steps` steps of the GPipe order (forwards, then backwards in reverse);
// returns each stage's parameters.
struct CutRef {
  bool grad_mask = true;
  float drop_l1 = 0;
  bool bf16 = false;
};
std::array<std::vector<float>, 2> dct_mp_reference(const DlrmConfig& cfg, const std::vector<DlrmStage>& plan,
                                                   std::size_t keep, std::size_t steps, std::size_t micro,
                                                   CutRef o = {}) {
  const auto wire = [&](float v) { return o.bf16 ? compress::bf16_to_float(compress::float_to_bf16(v)) : v; };
  Dlrm<float> s0(cfg, 3, plan[0]), s1(cfg, 3, plan[1]);
  Optimizer<float> o0({.lr = 0.1}, s0), o1({.lr = 0.1}, s1);
  const std::size_t cols = s1.stage_in_width();
  for (std::size_t k = 0; k < steps; ++k) {
    const Batch b = make_batch(cfg, k, 20);
    s0.stage_begin(b, micro);
    s1.stage_begin(b, micro);
    std::vector<std::vector<char>> mask(micro);
    std::vector<std::vector<float>> x(micro), dl(micro);
    std::size_t first = 0;
    for (std::size_t mb = 0; mb < micro; ++mb) {
      const auto y = s0.stage_forward(mb, nullptr);
      const std::size_t rows = y.size() / cols;
      mask[mb].assign(y.size(), 0);
      for (std::size_t r = 0; r < rows; ++r) {
        std::vector<std::size_t> order(cols);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t c) {
          return std::abs(y[r * cols + a]) > std::abs(y[r * cols + c]);
        });
        for (std::size_t j = 0; j < keep; ++j) mask[mb][r * cols + order[j]] = 1;
      }
      x[mb].resize(y.size());
      for (std::size_t i = 0; i < y.size(); ++i) x[mb][i] = mask[mb][i] ? wire(y[i]) : 0.0f;
      const auto z = s1.stage_forward(mb, x[mb].data());
      dl[mb].resize(rows);
      bce_with_logits<float>(z, std::span(b.labels).subspan(first, rows), dl[mb]);
      for (float& v : dl[mb]) v *= static_cast<float>(static_cast<double>(rows) / static_cast<double>(b.size));
      first += rows;
    }
    for (std::size_t mb = micro; mb-- > 0;) {
      const float* dx = s1.stage_backward(mb, dl[mb].data());
      std::vector<float> g(dx, dx + mask[mb].size());
      for (std::size_t i = 0; i < g.size(); ++i) {
        if (mask[mb][i]) g[i] = wire(g[i]);
        if (o.grad_mask && !mask[mb][i]) g[i] = 0.0f;
        if (!mask[mb][i]) g[i] += o.drop_l1 / static_cast<float>(b.size);
      }
      s0.stage_backward(mb, g.data());
    }
    s0.stage_end();
    s1.stage_end();
    o0.step();
    o1.step();
  }
  return {test::all_params(s0), test::all_params(s1)};
}

// X_grad goes back under the mask X_act was sent with: the pipeline trains
// both stages exactly as the reference above does with the forward mask,
// and visibly unlike it without a mask on X_grad.
TEST(Pipeline, DctMpSendsXGradUnderTheForwardMask) {
  set_blas_threads(1);
  SPARQ_NEED_RANKS(2);
  const DlrmConfig cfg = config();
  const auto plan = plan_stages(cfg, "bot:1");  // the activation is 64 wide: 4 values a sample kept at 95 %
  const std::size_t steps = 3, micro = 2;
  const auto masked = dct_mp_reference(cfg, plan, 4, steps, micro);
  const auto unmasked = dct_mp_reference(cfg, plan, 4, steps, micro, {.grad_mask = false});
  ASSERT_GT(test::max_abs_diff(masked[0], unmasked[0]), 1e-4) << "the mask on X_grad must matter here";
  test::run_ranks(2, [&](Transport& t) {
    Dlrm<float> stage(cfg, 3, plan[t.rank()]);
    Optimizer<float> opt({.lr = 0.1}, stage);
    Pipeline pipe(t, stage, opt, micro, parse_mp_codec("dct:0.95"));
    for (std::size_t k = 0; k < steps; ++k) pipe.step(make_batch(cfg, k, 20), k);
    EXPECT_LT(test::max_abs_diff(test::all_params(stage), masked[t.rank()]), 1e-6) << "stage " << t.rank();
  });
}

// dct's options train as the reference does: grad=dense sends X_grad whole
// (the ablation without the mask backward), l1= adds the drop penalty on the
// sending stage alone (nothing more crosses the cut), +bf16 rounds what
// crosses to bfloat16 and sends half the value bytes.
TEST(Pipeline, DctMpOptionsTrainAsTheReference) {
  set_blas_threads(1);
  SPARQ_NEED_RANKS(2);
  const DlrmConfig cfg = config();
  const auto plan = plan_stages(cfg, "bot:1");  // 64 wide, 4 values a sample kept
  const std::size_t steps = 3, micro = 2, n = steps * 20, mask = 8;
  const auto masked = dct_mp_reference(cfg, plan, 4, steps, micro);
  const auto penalised = dct_mp_reference(cfg, plan, 4, steps, micro, {.drop_l1 = 0.05f});
  const auto rounded = dct_mp_reference(cfg, plan, 4, steps, micro, {.bf16 = true});
  ASSERT_GT(test::max_abs_diff(masked[0], penalised[0]), 1e-4) << "the penalty must matter here";
  ASSERT_GT(test::max_abs_diff(masked[0], rounded[0]), 1e-6) << "the rounding must matter here";
  struct Case {
    const char* codec;
    std::array<std::vector<float>, 2> want;
    std::size_t act_bytes, grad_bytes;
  };
  for (const auto& c : {Case{"dct:0.95,grad=dense", dct_mp_reference(cfg, plan, 4, steps, micro, {.grad_mask = false}),
                             n * (mask + 4 * 4), n * 64 * 4},
                        Case{"dct:0.95,l1=0.05", penalised, n * (mask + 4 * 4), n * 4 * 4},
                        Case{"dct:0.95+bf16", rounded, n * (mask + 4 * 2), n * 4 * 2}}) {
    SCOPED_TRACE(c.codec);
    test::run_ranks(2, [&](Transport& t) {
      Dlrm<float> stage(cfg, 3, plan[t.rank()]);
      Optimizer<float> opt({.lr = 0.1}, stage);
      Pipeline pipe(t, stage, opt, micro, parse_mp_codec(c.codec));
      ExchangeStats act, grad;
      for (std::size_t k = 0; k < steps; ++k) {
        const auto s = pipe.step(make_batch(cfg, k, 20), k);
        act += s.x_act;
        grad += s.x_grad;
      }
      EXPECT_LT(test::max_abs_diff(test::all_params(stage), c.want[t.rank()]), 1e-6) << "stage " << t.rank();
      EXPECT_EQ(t.rank() == 0 ? act.bytes_sent : grad.bytes_sent, t.rank() == 0 ? c.act_bytes : c.grad_bytes);
    });
  }
}

// The paper's negative baselines send what they promise: sketch:0.5 sends
// X S with S of 32 columns for a 64-wide cut and X_grad in fp32; topk-grad
// sends X_act in fp32 and the top 10% of each X_grad row with its mask.
// topk-grad:0 keeps everything (residuals stay zero): exactly the dense pipeline.
TEST(Pipeline, NegativeBaselinesSendWhatTheyPromise) {
  set_blas_threads(1);
  SPARQ_NEED_RANKS(2);
  const DlrmConfig cfg = config();
  const auto plan = plan_stages(cfg, "bot:1");  // the activation is 64 wide
  std::vector<float> params[2];
  for (const char* codec : {"sketch:0.5", "topk-grad:0.9", "topk-grad:0", "none"}) {
    SCOPED_TRACE(codec);
    test::run_ranks(2, [&](Transport& t) {
      Dlrm<float> stage(cfg, 3, plan[t.rank()]);
      Optimizer<float> opt({.lr = 0.1}, stage);
      Pipeline pipe(t, stage, opt, 2, parse_mp_codec(codec));
      ExchangeStats act, grad;
      for (std::size_t k = 0; k < 10; ++k) {
        const auto s = pipe.step(make_batch(cfg, k, 20), k);
        act += s.x_act;
        grad += s.x_grad;
      }
      const std::string c = codec;
      // What each side sends: [rank][codec] -> (X_act bytes, X_grad bytes).
      if (c == "sketch:0.5") {
        EXPECT_EQ(t.rank() == 0 ? act.bytes_sent : grad.bytes_sent, t.rank() == 0 ? 10u * 20 * 32 * 4 : 10u * 20 * 64 * 4);
      } else if (c == "topk-grad:0.9") {
        EXPECT_EQ(t.rank() == 0 ? act.bytes_sent : grad.bytes_sent, t.rank() == 0 ? 10u * 20 * 64 * 4 : 10u * 20 * (7 * 4 + 8));
      }
      for (float p : stage.dense().params()) ASSERT_TRUE(std::isfinite(p));
      if (t.rank() == 0 && (c == "topk-grad:0" || c == "none")) {  // stage 0 receives X_grad
        auto& v = params[c == "none"];
        v.assign(stage.dense().params().begin(), stage.dense().params().end());
      }
    });
  }
  EXPECT_EQ(params[0], params[1]);
}

}  // namespace
}  // namespace sparq
