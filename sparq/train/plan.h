#pragma once
// A parallel plan: how the ranks of a job share the model and each step.
// The trainer (trainer.h) runs the same loop over any plan; what differs
// between them lives in each plan's own file:
//
//   plan_data_parallel.cc  every rank a replica (DataParallel): --ranks P
//   plan_hybrid.cc         replicas of an M-stage pipeline (Hybrid): --mp-splits
//   plan_ps.cc             workers and parameter servers (PsWorker/PsServer): --dp-mode ps
//
//        trainer                          plan
//   load checkpoint ------------------> load(path)          (a stage takes its part)
//   describe the run -----------------> describe(), serve() (a server serves, returns)
//   for each step: batch -------------> batch_part(), step(batch, k) -> StepResult
//   every N steps --------------------> verify(), gather() + save_state() (checkpoint)
//   at tests -------------------------> test(records)       (rank 0 gets the metrics)
//   at the end -----------------------> report(traffic), finish()
//
// Every rank of the job builds its plan (make_plan) and runs the trainer;
// rank 0 prints and writes.
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sparq/coll/blob_allgather.h"
#include "sparq/compress/error_feedback.h"
#include "sparq/data/dataset.h"
#include "sparq/model/dlrm.h"
#include "sparq/model/optimizer.h"
#include "sparq/train/accounting.h"
#include "sparq/train/data_parallel.h"
#include "sparq/train/evaluate.h"
#include "sparq/train/pipeline.h"
#include "sparq/train/sink.h"
#include "sparq/train/table_wise.h"

namespace sparq {

struct PlanOptions {
  DlrmConfig cfg;
  // Table-wise data parallelism: replica 0 also holds every table, to test
  // and checkpoint the whole model. false: runs that do neither (sparq
  // plan's timing runs) save the copy, and testing or gathering the model is
  // an error.
  bool whole_model_on_rank0 = true;
  std::uint64_t seed = 1;  // the model's initial weights
  OptimizerOptions optimizer;
  std::string optimizer_name = "sgd", embedding_optimizer_name = "sgd";  // as given, for checkpoints and reports
  DataParallelOptions dp;  // the dense gradients' codec; the tables' placement and alltoall codecs
  // Model parallelism: the cuts (plan_stages; empty: none), micro-batches,
  // what crosses a cut, and the sparsity whose X_act threshold is tracked.
  std::string mp_splits;
  std::size_t micro_batches = 1;
  MpCodec mp_codec{};
  double mp_threshold_eta = 0.95;
  // Parameter server (servers > 0): the last `servers` ranks hold the model.
  int servers = 0;
  std::uint64_t max_staleness = 0;
  compress::DrainOptions drain{};  // error feedback's residual drains
};

// What one step did on this rank.
struct StepResult {
  double loss_sum = 0;       // summed over this rank's samples
  std::size_t samples = 0;   // this rank's samples
  std::size_t correct = 0;   // its predictions that equal the label
  double forward_s = 0, backward_s = 0, optimizer_s = 0;
  double wait_s = 0;         // blocked on communication
  std::optional<ModeledPhases> modeled;  // data-parallel plans on a virtual clock
  Accounting traffic;        // what this rank sent, by entity
  double threshold_sum = 0;  // model parallel: X_act's top-K thresholds at the first cut, summed over rows
  std::size_t threshold_rows = 0;
  bool skipped = false;      // --non-finite skip: a NaN or inf on some rank; nothing was updated
};

// A model and its optimizer state, whole (null on the ranks that do not hold it).
struct WholeModel {
  const Dlrm<float>* model = nullptr;
  Optimizer<float>* optimizer = nullptr;
  // Whether `optimizer` made every update of `model`'s tables, so that its
  // changed rows are all that changed (incremental checkpoints need that).
  bool tracks_changes = false;
};

class Plan {
 public:
  virtual ~Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  const PlanOptions& options() const { return o_; }
  Transport& transport() { return t_; }
  Dlrm<float>& model() { return model_; }  // this rank's part of it
  Optimizer<float>& optimizer() { return opt_; }
  // The ranks that train (all, or the parameter server's workers): they take
  // the same global batches and sum their losses; checkpoints hold their
  // codec states.
  virtual Transport& peers() { return t_; }

  // Loads a checkpoint of the whole model into this rank's model and
  // optimizer; returns every training rank's codec state in it.
  virtual std::vector<Blob> load(const std::string& path);
  // Lines that describe the plan, printed after the model's ("" for none).
  virtual std::string describe() = 0;
  // A rank that serves instead of training (a parameter server) serves here
  // until every worker has finished and returns true; the others return false.
  virtual bool serve(std::uint64_t /*first_step*/) { return false; }
  // What step() reads of a global batch of `size` samples (nothing: all of it).
  virtual std::optional<BatchPart> batch_part(std::size_t /*size*/) const { return std::nullopt; }
  // Step k on `global` (the same batch on every training rank), then error
  // feedback's drain of step k.
  StepResult step(const Batch& global, std::uint64_t k);
  // This rank's codec state (residuals, thresholds, plans): load_state() of
  // what this rank saved under the same options continues bit for bit.
  virtual Blob save_state() const = 0;
  virtual void load_state(std::span<const std::byte> blob) = 0;
  // This rank's state from the states every training rank of a run on more
  // ranks saved, where the plan can re-partition them (error feedback is a
  // sum: folded, not lost); nothing where it cannot.
  struct FoldedState {
    Blob blob;
    std::string how;  // what was folded and what starts afresh, for the run's note
  };
  virtual std::optional<FoldedState> repartition_state(std::span<const Blob> /*saved*/) const { return std::nullopt; }
  // Brings the whole model and its optimizer state to rank 0 and returns
  // them there, for a checkpoint after `steps` steps. Every rank calls it.
  virtual WholeModel gather(std::uint64_t steps) = 0;
  // Test metrics of the model after `steps` steps: on rank 0, nothing
  // elsewhere. Every rank calls it.
  virtual std::optional<EvalResult> test(const RecordSet& test, std::size_t batch, std::uint64_t steps) = 0;
  // Throws when parameters that must be identical on several ranks are not.
  virtual void verify(std::uint64_t step) = 0;
  // Whether this rank runs the whole MLPs (the summary's GFLOP/s applies).
  virtual bool whole_mlps() const { return true; }
  // The end of training: the plan's checks, its lines and the accounting
  // table of `traffic` (this rank's, cumulative). Every rank calls it.
  virtual void report(const Accounting& traffic, std::uint64_t steps, TrainerSink& out) = 0;
  // Last of all: what the plan owes its peers when it is done.
  virtual void finish() {}

 protected:
  Plan(Transport& t, PlanOptions o, DlrmStage stage = {}, const std::vector<bool>& hold = {});
  virtual StepResult run_step(const Batch& global, std::uint64_t k) = 0;
  Transport& t_;
  PlanOptions o_;
  Dlrm<float> model_;
  Optimizer<float> opt_;
  compress::ErrorFeedbackStore residuals_;
};

// The plan the options describe, for this rank of `t`: parameter server when
// o.servers > 0, hybrid (or model parallel) when o.mp_splits cuts the model,
// data parallel otherwise (one rank included).
std::unique_ptr<Plan> make_plan(Transport& t, const PlanOptions& o);

// Table-wise placement: which tables this rank's model holds (table_wise.h)
// when the plan has `stages` stages; empty: all of them.
std::vector<bool> tables_held(const Transport& t, const PlanOptions& o, std::size_t stages);

// What replicas exchange, as the step's traffic: the dense gradients, and
// the tables' gradients (replicated) or lookups and their gradients (table-wise).
void add_replica_traffic(Accounting& traffic, EmbPlacement placement, const ExchangeStats& w_grad,
                         const ExchangeStats& emb_grad, const ExchangeStats& emb_fwd, const ExchangeStats& emb_bwd);

// Each plan's maker, in its own file.
std::unique_ptr<Plan> make_data_parallel_plan(Transport& t, const PlanOptions& o);
std::unique_ptr<Plan> make_hybrid_plan(Transport& t, const PlanOptions& o);
std::unique_ptr<Plan> make_ps_plan(Transport& t, const PlanOptions& o);

}  // namespace sparq
