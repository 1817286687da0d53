// The training loop without the CLI: a plan from make_plan() and train() on
// 2 ranks, read through the sink, against a plain sequential loop (one model,
// the same batches in the same order, SGD): the same parameters up to float
// summation order, the same training losses in the progress events, the same
// test metrics.
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>
#include <thread>

#include "sparq/core/rng.h"
#include "sparq/model/blas.h"
#include "sparq/model/loss.h"
#include "sparq/train/trainer.h"
#include "tests/support/ranks.h"
#include "tests/train/fixtures.h"

namespace sparq {
namespace {

// Criteo-shaped records (the trainer reads records): 13 dense, 26 ids.
std::vector<CriteoRecord> make_records(std::size_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<CriteoRecord> v(n);
  for (auto& r : v) {
    for (auto& x : r.dense) x = static_cast<float>(rng.uniform());
    for (auto& s : r.sparse) s = static_cast<std::uint32_t>(rng.below(40));
    r.label = r.dense[0] + 0.1 * static_cast<double>(r.sparse[0] % 3) > 0.6 ? 1.f : 0.f;  // learnable
  }
  return v;
}

// 256 training records and 100 test records, the same in every test.
TrainData small_data() {
  TrainData data;
  data.train = RecordSet(make_records(256, 1));
  data.test = RecordSet(make_records(100, 2));
  return data;
}

DlrmConfig criteo_config() {
  DlrmConfig c;
  c.bot_mlp = {13, 8, 4};
  c.top_mlp = {8, 1};
  c.emb_dim = 4;
  c.table_rows.assign(kCriteoSparse, 20);
  return c;
}

// Keeps what rank 0 writes; notes any other thread that writes.
class RecordingSink final : public TrainerSink {
 public:
  void line(const std::string& text) override { keep([&] { lines += text; }); }
  void event(const nlohmann::json& e) override { keep([&] { events.push_back(e); }); }
  std::vector<nlohmann::json> of(const std::string& kind) const {
    std::vector<nlohmann::json> v;
    for (const auto& e : events)
      if (e["event"] == kind) v.push_back(e);
    return v;
  }
  std::string lines;
  std::vector<nlohmann::json> events;
  bool one_writer = true;

 private:
  template <class F>
  void keep(F f) {
    std::lock_guard lk(mu_);
    if (writer_ == std::thread::id{}) writer_ = std::this_thread::get_id();
    one_writer = one_writer && writer_ == std::this_thread::get_id();
    f();
  }
  std::mutex mu_;
  std::thread::id writer_;
};

struct Reference {
  std::vector<float> params;
  std::vector<double> step_losses;  // mean loss of each global batch, before its update
  EvalResult test;
};

// One model trained on the trainer's batches in the trainer's order.
Reference train_sequentially(const PlanOptions& po, const TrainData& data, const TrainerOptions& to) {
  Dlrm<float> model(po.cfg, po.seed);
  Optimizer<float> opt(po.optimizer, model);
  BatchPlan plan(data.train.size(), {.batch = to.batch, .shuffle = to.shuffle, .seed = to.seed});
  Reference ref;
  Batch b;
  std::vector<float> dl;
  plan.start_epoch(0);
  for (std::size_t k = 0; k < plan.num_batches(); ++k) {
    plan.fill(k, data.train.records(), po.cfg.table_rows, b);
    const auto z = model.forward(b);
    dl.resize(b.size);
    ref.step_losses.push_back(bce_with_logits<float>(z, b.labels, dl));
    model.backward(dl);
    opt.step();
  }
  ref.params = test::all_params(model);
  ref.test = *evaluate(model, data.test, to.test_batch);
  return ref;
}

TEST(Trainer, TwoRanksTrainAsOneSequentialModelAndReportThroughTheSink) {
  SPARQ_NEED_RANKS(2);
  set_blas_threads(1);  // ranks are threads here
  const TrainData data = small_data();
  PlanOptions po;
  po.cfg = criteo_config();
  po.seed = 5;
  po.optimizer.lr = 0.2;
  TrainerOptions to;
  to.batch = 32;  // 8 steps
  to.print_freq = 4;
  to.test_batch = 64;
  const Reference ref = train_sequentially(po, data, to);

  RecordingSink sink;
  std::vector<float> params;
  bool lead = false;  // this process holds rank 0 (under mpiexec one process does)
  test::run_ranks(2, [&](Transport& t) {
    const std::unique_ptr<Plan> plan = make_plan(t, po);
    train(*plan, data, to, sink);
    if (t.rank() == 0) lead = true, params = test::all_params(plan->model());
  });
  if (!lead) return;
  EXPECT_TRUE(sink.one_writer);
  EXPECT_LT(test::max_abs_diff(params, ref.params), 1e-5);

  // Progress: every 4 steps, the mean loss of those 4 global batches.
  const auto train = sink.of("train");
  ASSERT_EQ(train.size(), 2u);
  for (std::size_t w = 0; w < 2; ++w) {
    const double mean = (ref.step_losses[4 * w] + ref.step_losses[4 * w + 1] + ref.step_losses[4 * w + 2] +
                         ref.step_losses[4 * w + 3]) / 4;
    EXPECT_EQ(train[w]["step"], 4 * (w + 1));
    EXPECT_NEAR(train[w]["loss"].get<double>(), mean, 1e-5);
    EXPECT_TRUE(train[w]["traffic"].contains("W_grad"));
  }
  EXPECT_NE(sink.lines.find("Finished training it 4/8 of epoch 0"), std::string::npos) << sink.lines;
  EXPECT_NE(sink.lines.find("data parallel: 2 ranks, --dp-codec none"), std::string::npos) << sink.lines;

  // The test at the epoch's end scores the trained model.
  const auto tests = sink.of("test");
  ASSERT_EQ(tests.size(), 1u);
  EXPECT_NEAR(tests[0]["loss"].get<double>(), ref.test.loss, 1e-5);
  EXPECT_NEAR(tests[0]["auc"].get<double>(), ref.test.auc, 1e-4);

  // The accounting of rank 0's exchanges, the summary and the memory line.
  const auto acct = sink.of("accounting");
  ASSERT_EQ(acct.size(), 2u);
  EXPECT_EQ(acct[0]["entity"], "W_grad");
  EXPECT_EQ(acct[1]["entity"], "emb_grad");
  EXPECT_GT(acct[0]["bytes_sent"].get<double>(), 0);
  ASSERT_EQ(sink.of("summary").size(), 1u);
  EXPECT_EQ(sink.of("summary")[0]["steps"], 8);
  EXPECT_EQ(sink.of("memory").size(), 1u);
  for (const auto& e : sink.events) EXPECT_TRUE(e.contains("wall_s") && e.contains("train_s")) << e.dump();
}

// sparq plan's timing runs: table-wise without the whole model on rank 0
// train the same dense parameters, rank 0 holds only its own tables, and a
// test (which gathers the model) is refused instead of reading tables that
// are not there.
TEST(Trainer, TableWiseWithoutTheWholeModelOnRankZeroTrainsTheSameAndCannotTest) {
  SPARQ_NEED_RANKS(2);
  set_blas_threads(1);
  const TrainData data = small_data();
  TrainerOptions to;
  to.batch = 32;
  to.print_freq = 8;
  to.test_freq = -1;
  const auto dense_after = [&](bool whole, std::size_t* tables_held) {
    PlanOptions po;
    po.cfg = criteo_config();
    po.dp.placement = EmbPlacement::TableWise;
    po.whole_model_on_rank0 = whole;
    std::vector<float> dense;
    test::run_ranks(2, [&](Transport& t) {
      RecordingSink sink;
      const std::unique_ptr<Plan> plan = make_plan(t, po);
      train(*plan, data, to, sink);
      if (t.rank() != 0) return;
      dense.assign(plan->model().dense().params().begin(), plan->model().dense().params().end());
      *tables_held = 0;
      for (const auto& table : plan->model().tables()) *tables_held += !table.weights().empty();
      if (!whole) {
        EXPECT_THROW(plan->gather(8), Error);
      }
    });
    return dense;
  };
  std::size_t whole_tables = 0, own_tables = 0;
  const std::vector<float> a = dense_after(true, &whole_tables), b = dense_after(false, &own_tables);
  if (a.empty()) return;  // under mpiexec this process is not rank 0
  EXPECT_EQ(a, b);
  EXPECT_EQ(whole_tables, kCriteoSparse);
  EXPECT_EQ(own_tables, kCriteoSparse / 2);  // 26 tables of equal rows over 2 ranks
}

TEST(Trainer, StopsAtTheFirstTestThatReachesTheTarget) {
  SPARQ_NEED_RANKS(2);
  set_blas_threads(1);
  const TrainData data = small_data();
  PlanOptions po;
  po.cfg = criteo_config();
  TrainerOptions to;
  to.batch = 32;
  to.nepochs = 3;
  to.test_freq = 3;
  to.target_loss = 100;  // any test reaches it
  RecordingSink sink;
  bool lead = false;
  test::run_ranks(2, [&](Transport& t) {
    const std::unique_ptr<Plan> plan = make_plan(t, po);
    train(*plan, data, to, sink);
    if (t.rank() == 0) lead = true;
  });
  if (!lead) return;
  const auto target = sink.of("target");
  ASSERT_EQ(target.size(), 1u);
  EXPECT_EQ(target[0]["step"], 3);
  EXPECT_EQ(sink.of("summary")[0]["steps"], 3);
  EXPECT_EQ(sink.of("summary")[0]["target_reached"], true);
  EXPECT_EQ(sink.of("summary")[0]["samples"], 96);  // the 3 steps since the last progress line count
  EXPECT_NE(sink.lines.find("target reached: test loss"), std::string::npos) << sink.lines;
}

}  // namespace
}  // namespace sparq
