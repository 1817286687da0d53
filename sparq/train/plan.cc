#include "sparq/train/plan.h"

#include "sparq/model/checkpoint.h"

namespace sparq {

Plan::Plan(Transport& t, PlanOptions o, DlrmStage stage, const std::vector<bool>& hold)
    : t_(t),
      o_(std::move(o)),
      model_(o_.cfg, o_.seed, stage, hold),
      opt_(o_.optimizer, model_),
      residuals_(o_.drain) {}

StepResult Plan::step(const Batch& global, std::uint64_t k) {
  StepResult r = run_step(global, k);
  if (!r.skipped) residuals_.maybe_drain(k);
  return r;
}

std::vector<Blob> Plan::load(const std::string& path) {
  std::vector<Blob> states;
  load_checkpoint(path, model_, &opt_, &states);
  return states;
}

std::vector<bool> tables_held(const Transport& t, const PlanOptions& o, std::size_t stages) {
  // Table-wise: a replica holds the tables it owns, and replica 0, which
  // gathers the model for tests and checkpoints, all of them (data parallel:
  // every rank is a replica; hybrid: rank = replica * stages + stage).
  std::vector<bool> hold;
  const int replica = t.rank() / static_cast<int>(stages);
  if (o.dp.placement == EmbPlacement::TableWise && (replica != 0 || (stages == 1 && !o.whole_model_on_rank0))) {
    const std::vector<int> owner = assign_tables(o.cfg.table_rows, t.size() / static_cast<int>(stages));
    for (int r : owner) hold.push_back(r == replica);
  }
  return hold;
}

void add_replica_traffic(Accounting& traffic, EmbPlacement placement, const ExchangeStats& w_grad,
                         const ExchangeStats& emb_grad, const ExchangeStats& emb_fwd, const ExchangeStats& emb_bwd) {
  traffic.add("W_grad", w_grad);
  if (placement == EmbPlacement::TableWise) {
    traffic.add("emb_fwd", emb_fwd);
    traffic.add("emb_bwd", emb_bwd);
  } else {
    traffic.add("emb_grad", emb_grad);
  }
}

std::unique_ptr<Plan> make_plan(Transport& t, const PlanOptions& o) {
  if (o.servers > 0) return make_ps_plan(t, o);
  if (plan_stages(o.cfg, o.mp_splits).size() > 1) return make_hybrid_plan(t, o);
  return make_data_parallel_plan(t, o);
}

}  // namespace sparq
