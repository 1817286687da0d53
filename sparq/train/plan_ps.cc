// The parameter-server plan: ranks [0, W) are workers (PsWorker), the last
// `servers` ranks hold the model and apply the workers' pushes (PsServer).
#include <fmt/format.h>

#include <numeric>

#include "sparq/train/param_server.h"
#include "sparq/train/plan.h"
#include "sparq/transport/group_transport.h"

namespace sparq {

namespace {

class PsPlan final : public Plan {
 public:
  PsPlan(Transport& t, const PlanOptions& o) : Plan(t, o), layout_(model_, t.size() - o.servers, o.servers) {
    if (serves()) return;
    std::vector<int> members(static_cast<std::size_t>(layout_.workers));
    std::iota(members.begin(), members.end(), 0);
    workers_.emplace(t, members);
    worker_.emplace(t, model_, layout_, o_.dp.codec, residuals_);
  }

  Transport& peers() override { return workers_ ? static_cast<Transport&>(*workers_) : t_; }

  std::string describe() override {
    return fmt::format("parameter server: {} workers, {} servers, --max-staleness {}, --dp-codec {}\n",
                       layout_.workers, layout_.servers, o_.max_staleness, o_.dp.codec.text);
  }

  // A server serves until every worker has finished.
  bool serve(std::uint64_t first_step) override {
    if (!serves()) return false;
    PsServer(t_, model_, layout_, o_.optimizer.lr, o_.max_staleness, first_step).run();
    return true;
  }

  Blob save_state() const override { return worker_->save_state(); }
  void load_state(std::span<const std::byte> blob) override { worker_->load_state(blob); }

  // The servers' shards make the complete model, once every worker has pushed as many steps.
  WholeModel gather(std::uint64_t steps) override {
    if (t_.rank() != 0) return {};
    worker_->fetch_all(steps);
    return {&model_, &opt_};
  }

  std::optional<EvalResult> test(const RecordSet& test, std::size_t batch, std::uint64_t steps) override {
    if (t_.rank() != 0) return std::nullopt;
    gather(steps);
    return evaluate(model_, test, batch);
  }

  void verify(std::uint64_t) override {}  // workers hold what they pulled, each at its own step

  void report(const Accounting& traffic, std::uint64_t steps, TrainerSink& out) override {
    report_accounting(traffic, steps,
                      fmt::format("worker 0; --dp-mode ps, --servers {}, --max-staleness {}, --dp-codec {}",
                                  layout_.servers, o_.max_staleness, o_.dp.codec.text),
                      out, true);
  }

  void finish() override { worker_->finish(); }  // the servers stop once every worker has

 private:
  bool serves() const { return t_.rank() >= layout_.workers; }

  StepResult run_step(const Batch& global, std::uint64_t k) override {
    const PsWorkerStats s = worker_->step(global, k);
    StepResult r;
    r.loss_sum = s.loss * static_cast<double>(s.samples), r.samples = s.samples, r.correct = s.correct;
    r.forward_s = s.forward_s, r.backward_s = s.backward_s, r.wait_s = s.wait_s;
    r.traffic.add("W_grad", s.w_grad);
    r.traffic.add("emb_grad", s.emb_grad);
    ExchangeStats pull = s.pull;  // received; no compressed form to compare with
    pull.dense_bytes = pull.bytes_sent;
    r.traffic.add("pull", pull);
    return r;
  }

  PsLayout layout_;
  std::optional<GroupTransport> workers_;  // the workers, for their loss sums and codec states
  std::optional<PsWorker> worker_;
};

}  // namespace

std::unique_ptr<Plan> make_ps_plan(Transport& t, const PlanOptions& o) { return std::make_unique<PsPlan>(t, o); }

}  // namespace sparq
