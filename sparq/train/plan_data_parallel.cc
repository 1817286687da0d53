// The data-parallel plan: every rank a replica of the model (DataParallel);
// one rank is the plain single-process case.
#include <fmt/format.h>

#include <cstdio>

#include "sparq/coll/patterns.h"
#include "sparq/train/plan.h"
#include "sparq/train/verify.h"

namespace sparq {

namespace {

// ", --emb-codec-fwd F --emb-codec-bwd B" (table-wise), ", --emb-codec-bwd bf16" (replicated, bf16 gradients) or "".
std::string emb_codecs(const DataParallelOptions& d) {
  if (d.placement == EmbPlacement::TableWise)
    return fmt::format(", --emb-codec-fwd {} --emb-codec-bwd {}", d.emb_fwd.name(), d.emb_bwd.name());
  return d.emb_grad_values == compress::ValueFormat::Bf16 ? ", --emb-codec-bwd bf16" : "";
}

class DataParallelPlan final : public Plan {
 public:
  DataParallelPlan(Transport& t, const PlanOptions& o)
      : Plan(t, o, {}, tables_held(t, o, 1)), dp_(t, model_, opt_, o_.dp, residuals_) {
    if (t.size() > 1 && o_.dp.comm_nice != 0)
      if (const std::string why = dp_.comm_priority_note(); !why.empty())
        std::fprintf(stderr, "rank %d: the communication thread runs at the default priority: %s\n", t.rank(),
                     why.c_str());
  }

  std::string describe() override {
    if (t_.size() == 1) return "";
    const DataParallelOptions& d = dp_.options();  // as run: --non-finite skip turns overlap off
    std::string s =
        fmt::format("data parallel: {} ranks, --dp-codec {}, --emb-placement {}{}, overlap {}, fuse {} bytes{}\n",
                    t_.size(), d.codec.text, emb_placement_name(d.placement), emb_codecs(d), d.overlap ? "on" : "off",
                    d.fuse_bytes, d.skip_non_finite ? ", --non-finite skip" : "");
    if (d.comm_nice != 0 && dp_.comm_priority_note().empty())
      s += fmt::format("communication thread: nice {}\n", d.comm_nice);
    return s;
  }

  std::optional<BatchPart> batch_part(std::size_t size) const override { return dp_.batch_part(size); }

  Blob save_state() const override { return dp_.save_state(); }
  void load_state(std::span<const std::byte> blob) override { dp_.load_state(blob); }
  std::optional<FoldedState> repartition_state(std::span<const Blob> saved) const override {
    const auto ranks = static_cast<std::size_t>(t_.size());
    // More ranks than saved: nothing to fold; no codec: no state to fold.
    if (saved.size() <= ranks || o_.dp.codec.kind == DpCodec::Kind::None) return std::nullopt;
    return FoldedState{DataParallel::repartition_state(saved, static_cast<std::size_t>(t_.rank()), ranks),
                       fmt::format("rank r's error feedback is the sum of saved ranks r, r + {}, ...{}", ranks,
                                   o_.dp.codec.kind == DpCodec::Kind::Dct ? "; its thresholds, saved rank r's" : "")};
  }

  WholeModel gather(std::uint64_t) override {
    SPARQ_CHECK(o_.dp.placement != EmbPlacement::TableWise || o_.whole_model_on_rank0,
                "table-wise run without the whole model on rank 0 (PlanOptions::whole_model_on_rank0): it cannot test "
                "or checkpoint");
    dp_.gather_model(0);  // table-wise: the tables of the other ranks
    // Replicated tables: rank 0's optimizer updates them all.
    return t_.rank() == 0 ? WholeModel{&model_, &opt_, o_.dp.placement == EmbPlacement::Replicated} : WholeModel{};
  }

  std::optional<EvalResult> test(const RecordSet& test, std::size_t batch, std::uint64_t steps) override {
    gather(steps);
    if (t_.rank() != 0) return std::nullopt;  // the dense replicas are identical: one rank tests
    return evaluate(model_, test, batch);
  }

  void verify(std::uint64_t step) override { verify_replica_hash(t_, dp_.replica_hash(), step); }

  void report(const Accounting& traffic, std::uint64_t steps, TrainerSink& out) override {
    if (t_.size() == 1) return;
    verify(steps);
    const DataParallelOptions& d = o_.dp;
    report_accounting(traffic, steps,
                      fmt::format("rank 0; --dp-codec {}, --emb-placement {}{}", d.codec.text,
                                  emb_placement_name(d.placement), emb_codecs(d)),
                      out);
  }

 private:
  StepResult run_step(const Batch& global, std::uint64_t k) override {
    const DpStepStats s = dp_.step(global, k);
    StepResult r;
    if (s.skipped) {
      r.skipped = true;
      return r;
    }
    r.samples = pattern::Partition{global.size, t_.size()}.len(t_.rank());
    r.loss_sum = s.loss * static_cast<double>(r.samples);
    r.correct = s.correct;
    r.forward_s = s.forward_s, r.backward_s = s.backward_s, r.optimizer_s = s.optimizer_s;
    if (t_.virtual_time()) r.modeled = s.modeled;
    if (t_.size() > 1) add_replica_traffic(r.traffic, o_.dp.placement, s.w_grad, s.emb_grad, s.emb_fwd, s.emb_bwd);
    r.wait_s = r.traffic.wait_seconds();
    return r;
  }

  DataParallel dp_;
};

}  // namespace

std::unique_ptr<Plan> make_data_parallel_plan(Transport& t, const PlanOptions& o) {
  return std::make_unique<DataParallelPlan>(t, o);
}

}  // namespace sparq
