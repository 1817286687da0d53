// The model-parallel plan: replicas of an M-stage pipeline (Hybrid); one
// replica is plain model parallelism.
#include <fmt/format.h>

#include "sparq/coll/allreduce.h"
#include "sparq/model/checkpoint.h"
#include "sparq/train/hybrid.h"
#include "sparq/train/plan.h"

namespace sparq {

namespace {

class HybridPlan final : public Plan {
 public:
  HybridPlan(Transport& t, const PlanOptions& o, std::vector<DlrmStage> stages)
      : Plan(t, o, stages[static_cast<std::size_t>(t.rank()) % stages.size()], tables_held(t, o, stages.size())),
        stages_(std::move(stages)),
        hybrid_(t, stages_.size(), model_, opt_, o_.micro_batches, o_.mp_codec, o_.dp, residuals_) {
    hybrid_.pipeline().track_threshold(o_.mp_threshold_eta);
  }

  // The checkpoint holds the whole model: this stage takes its part.
  std::vector<Blob> load(const std::string& path) override {
    Dlrm<float> whole(o_.cfg, o_.seed);
    Optimizer<float> whole_opt(o_.optimizer, whole);
    std::vector<Blob> states;
    load_checkpoint(path, whole, &whole_opt, &states);
    copy_stage(whole, whole_opt, model_, opt_);
    return states;
  }

  std::string describe() override {
    return fmt::format(
        "{}: {} replicas x {} stages (--mp-splits {}), {} micro-batches, --mp-codec {}, --dp-codec {}, "
        "--emb-placement {}\n",
        hybrid_.replicas() > 1 ? "hybrid parallel" : "model parallel", hybrid_.replicas(), stages_.size(),
        o_.mp_splits, o_.micro_batches, o_.mp_codec.text, o_.dp.codec.text, emb_placement_name(o_.dp.placement));
  }

  Blob save_state() const override { return hybrid_.save_state(); }
  void load_state(std::span<const std::byte> blob) override { hybrid_.load_state(blob); }
  std::optional<FoldedState> repartition_state(std::span<const Blob> saved) const override {
    const auto ranks = static_cast<std::size_t>(t_.size()), stages = stages_.size();
    // Fewer replicas of as many stages, with a codec between them: fold.
    if (saved.size() <= ranks || saved.size() % stages != 0 || o_.dp.codec.kind == DpCodec::Kind::None)
      return std::nullopt;
    return FoldedState{
        Hybrid::repartition_state(saved, static_cast<std::size_t>(t_.rank()), ranks, stages),
        fmt::format("replica r's error feedback is the sum of saved replicas r, r + {}, ... of its stage{}{}",
                    ranks / stages, o_.dp.codec.kind == DpCodec::Kind::Dct ? "; its thresholds, saved replica r's" : "",
                    o_.mp_codec.kind != MpCodec::Kind::None ? "; the cuts' residuals restart from zero" : "")};
  }

  // Rank 0 assembles the whole model from replica 0's stages.
  WholeModel gather(std::uint64_t) override {
    whole_.reset();
    whole_opt_.reset();
    if (t_.rank() == 0) {
      whole_ = std::make_unique<Dlrm<float>>(o_.cfg, o_.seed);
      whole_opt_ = std::make_unique<Optimizer<float>>(o_.optimizer, *whole_);
    }
    hybrid_.gather_tables();
    gather_whole(t_, stages_, model_, opt_, whole_.get(), whole_opt_.get());
    return {whole_.get(), whole_opt_.get()};
  }

  // Replica 0's stages run the test batches; its last scores them and tells rank 0.
  std::optional<EvalResult> test(const RecordSet& test, std::size_t batch, std::uint64_t) override {
    hybrid_.gather_tables();
    const auto r = evaluate([&](const Batch& b) { return hybrid_.predict(b); }, test, o_.cfg, batch);
    double m[4] = {r ? r->loss : 0, r ? r->accuracy : 0, r ? r->auc : 0, r ? r->positive_rate : 0};
    allreduce(t_, std::span<double>(m));
    if (t_.rank() != 0) return std::nullopt;
    return EvalResult{m[0], m[1], m[2], m[3]};
  }

  void verify(std::uint64_t step) override { hybrid_.verify(step); }  // among each stage's replicas
  bool whole_mlps() const override { return false; }

  void report(const Accounting& traffic, std::uint64_t steps, TrainerSink& out) override {
    verify(steps);
    report_stages(out);
    report_accounting(sum_over_ranks(t_, traffic), steps,
                      fmt::format("all ranks; --mp-splits {}, --mp-codec {}, --dp-codec {}, --emb-placement {}",
                                  o_.mp_splits, o_.mp_codec.text, o_.dp.codec.text,
                                  emb_placement_name(o_.dp.placement)),
                      out);
  }

 private:
  StepResult run_step(const Batch& global, std::uint64_t k) override {
    const HybridStepStats h = hybrid_.step(global, k);
    const PipelineStepStats& s = h.pipe;
    StepResult r;
    if (h.skipped) {
      r.skipped = true;
      return r;
    }
    r.loss_sum = h.loss_sum, r.samples = h.samples, r.correct = s.correct;
    r.forward_s = s.forward_s, r.backward_s = s.backward_s, r.optimizer_s = s.optimizer_s, r.wait_s = s.idle_s;
    r.threshold_sum = s.threshold_sum, r.threshold_rows = s.threshold_rows;
    r.traffic.add("X_act", s.x_act);
    r.traffic.add("X_grad", s.x_grad);
    if (hybrid_.replicas() > 1) {
      add_replica_traffic(r.traffic, o_.dp.placement, h.w_grad, h.emb_grad, h.emb_fwd, h.emb_bwd);
      r.wait_s += h.w_grad.wait_seconds + h.emb_grad.wait_seconds + h.emb_fwd.wait_seconds + h.emb_bwd.wait_seconds;
    }
    busy_s_ += s.forward_s + s.backward_s + s.optimizer_s;
    idle_s_ += r.wait_s;
    return r;
  }

  // Per rank: time computing and time waiting (for a neighbour, or the replicas' exchange).
  void report_stages(TrainerSink& out) {
    const int P = t_.size(), M = static_cast<int>(stages_.size());
    std::vector<double> bi(2 * static_cast<std::size_t>(P), 0.0);
    bi[2 * t_.rank()] = busy_s_, bi[2 * t_.rank() + 1] = idle_s_;
    allreduce(t_, std::span<double>(bi));
    for (int s = 0; s < P; ++s) {
      const double busy = bi[2 * s], idle = bi[2 * s + 1];
      out.line(fmt::format("rank {} (replica {}, stage {}): busy {:.3f} s, idle {:.3f} s ({:.1f} % idle)\n", s, s / M,
                           s % M, busy, idle, 100 * idle / std::max(1e-12, busy + idle)));
      out.event({{"event", "stage"}, {"rank", s}, {"replica", s / M}, {"stage", s % M}, {"busy_s", busy},
                 {"idle_s", idle}});
    }
  }

  std::vector<DlrmStage> stages_;
  Hybrid hybrid_;
  double busy_s_ = 0, idle_s_ = 0;  // this rank's, over the run
  std::unique_ptr<Dlrm<float>> whole_;  // rank 0, while it saves
  std::unique_ptr<Optimizer<float>> whole_opt_;
};

}  // namespace

std::unique_ptr<Plan> make_hybrid_plan(Transport& t, const PlanOptions& o) {
  return std::make_unique<HybridPlan>(t, o, plan_stages(o.cfg, o.mp_splits));
}

}  // namespace sparq
