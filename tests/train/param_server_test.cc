// Parameter-server training: one worker with staleness 0 is plain SGD, so it
// must end with the parameters of single-rank training whatever the number
// of servers; two asynchronous workers still train (the loss falls) and the
// servers' model stays finite; DCT-DP pushes fewer bytes; a bad push is a
// WireError, a silent worker a TimeoutError.
#include <gtest/gtest.h>

#include "sparq/model/blas.h"
#include "sparq/model/loss.h"
#include "sparq/model/optimizer.h"
#include "sparq/train/param_server.h"
#include "sparq/transport/local_transport.h"
#include "tests/support/ranks.h"
#include "tests/train/fixtures.h"

namespace sparq {
namespace {

using test::all_params;
using test::small_config;

// Four batches again and again: learnable even from random labels.
Batch cycled_batch(const DlrmConfig& c, std::uint64_t step, std::size_t n) {
  return test::make_batch(c, step % 4, 0, n);
}

// Runs `steps` PS steps on W workers + S servers; returns worker 0's fetched
// model and the workers' summed stats.
struct PsRun {
  std::vector<float> params;
  PsWorkerStats stats;
  std::vector<double> losses;  // worker 0's, per step
};

PsRun run_ps(int workers, int servers, std::uint64_t staleness, const std::string& codec, std::size_t steps) {
  PsRun out;
  const DlrmConfig cfg = small_config();
  test::run_ranks(workers + servers, [&](Transport& t) {
    Dlrm<float> model(cfg, 7);
    const PsLayout layout(model, workers, servers);
    if (t.rank() >= workers) {
      PsServer server(t, model, layout, 0.1, staleness);
      const auto st = server.run();
      EXPECT_EQ(st.pushes, steps * workers);
      return;
    }
    compress::ErrorFeedbackStore store;
    PsWorker worker(t, model, layout, parse_dp_codec(codec), store);
    PsWorkerStats sum;
    std::vector<double> losses;
    for (std::size_t k = 0; k < steps; ++k) {
      const auto s = worker.step(cycled_batch(cfg, k, 24), k);
      sum.w_grad += s.w_grad;
      sum.emb_grad += s.emb_grad;
      losses.push_back(s.loss);
    }
    if (t.rank() == 0) {
      worker.fetch_all(steps);
      out.params = all_params(model);
      out.stats = sum;
      out.losses = losses;
    }
    worker.finish();
  });
  return out;
}

TEST(ParamServer, OneWorkerIsSingleRankSgd) {
  SPARQ_LOCAL_ONLY();  // worker/server counts are fixed here; the CLI test covers mpiexec
  set_blas_threads(1);
  const DlrmConfig cfg = small_config();
  const std::size_t steps = 30;
  const auto want =
      all_params(*test::train_single(cfg, 7, steps, [&](std::size_t k) { return cycled_batch(cfg, k, 24); }));
  for (int servers : {1, 2, 3}) {
    EXPECT_LT(test::max_abs_diff(run_ps(1, servers, 0, "none", steps).params, want), 1e-6) << servers << " servers";
  }
}

TEST(ParamServer, AsynchronousWorkersTrainAndDctPushesLess) {
  SPARQ_LOCAL_ONLY();
  set_blas_threads(1);
  for (std::uint64_t staleness : {0, 2}) {
    const auto none = run_ps(2, 1, staleness, "none", 60);
    const auto dct = run_ps(2, 1, staleness, "dct:0.9,10", 60);
    for (const auto* r : {&none, &dct}) {
      for (float p : r->params) ASSERT_TRUE(std::isfinite(p));
      double first = 0, last = 0;
      for (int i = 0; i < 8; ++i) first += r->losses[i], last += r->losses[52 + i];
      EXPECT_LT(last, first) << "staleness " << staleness;
    }
    // Dense pushes: fp32 values, plus per tensor (8 here) a 12-byte stream
    // header and a 4-byte length, plus the 16-byte message header.
    EXPECT_EQ(none.stats.w_grad.bytes_sent, dct.stats.w_grad.dense_bytes + 60 * (8 * (12 + 4) + 16));
    EXPECT_GT(double(dct.stats.w_grad.dense_bytes) / double(dct.stats.w_grad.bytes_sent), 2.0);
  }
}

TEST(ParamServer, SilentWorkerTimesOut) {
  SPARQ_LOCAL_ONLY();
  const DlrmConfig cfg = small_config();
  EXPECT_THROW(run_local(
                   2,
                   [&](Transport& t) {
                     t.set_timeout(Millis(300));
                     Dlrm<float> model(cfg, 7);
                     const PsLayout layout(model, 1, 1);
                     if (t.rank() == 1) PsServer(t, model, layout, 0.1, 0).run();
                     // the worker never sends anything and returns
                   }),
               TimeoutError);
}

}  // namespace
}  // namespace sparq
