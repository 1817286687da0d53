#pragma once
// Model and hybrid parallelism: P = D x M ranks, rank = replica * M + stage.
// Each of the D replicas is an M-stage pipeline (Pipeline, over the replica's
// ranks) and trains on its share of the global batch; after the backward pass
// every stage averages its parameter gradients over its D replicas (over the
// stage's ranks): the dense ones with the --dp-codec (GradExchange, in one
// bucket), the tables' row-sparse ones (on the stage that holds them) with
// one sparse allreduce. D = 1 is plain model parallelism.
//
// With --emb-placement table-wise the middle stage's D replicas spread the
// tables over themselves (TableWise over the stage's ranks): before the
// pipeline runs, the owners pool their tables for the global batch and an
// alltoall gives each replica the lookups of its share (`emb_fwd`); after
// the backward pass the lookups' gradients go back to the owners
// (`emb_bwd`), and no table gradient is averaged.
//
// The exchange runs on the training thread after the pipeline's backward
// (not overlapped): the pipeline's point-to-point traffic and the stage's
// collectives then never use the transport from two threads at once.
#include <memory>
#include <optional>

#include "sparq/transport/group_transport.h"
#include "sparq/train/data_parallel.h"
#include "sparq/train/grad_exchange.h"
#include "sparq/train/pipeline.h"
#include "sparq/train/table_wise.h"

namespace sparq {

struct HybridStepStats {
  PipelineStepStats pipe;  // X_act, X_grad, this stage's busy/idle time
  ExchangeStats w_grad;    // this stage's dense gradients among its replicas
  ExchangeStats emb_grad;  // replicated tables: their gradients among the middle stage's replicas
  ExchangeStats emb_fwd, emb_bwd;  // table-wise: the lookups alltoall, and their gradients
  double loss_sum = 0;     // last stage: summed loss of its replica's share
  std::size_t samples = 0;
  bool skipped = false;    // --non-finite skip: a NaN or inf on some rank; nothing changed
};

class Hybrid {
 public:
  // `model` holds stage t.rank() % M of plan_stages(); all references must
  // outlive this object. Of `dp`, the codec acts on the dense gradients and
  // the placement (and its alltoall codecs) on the tables; it has no overlap
  // or fusion: a stage's gradients are one bucket. With dp.skip_non_finite a
  // step whose cuts or gradients hold a NaN or inf on any rank is skipped on
  // every rank: the stages send such values as 0 to finish the step, then
  // agree (two 4-byte allreduces) before the replicas' exchange, and a
  // skipped step leaves the model, the optimizer and the codecs as they were.
  Hybrid(Transport& t, std::size_t stages, Dlrm<float>& model, Optimizer<float>& opt, std::size_t micro_batches,
         MpCodec mp, const DataParallelOptions& dp, compress::ErrorFeedbackStore& residuals);

  std::size_t replicas() const { return static_cast<std::size_t>(stage_group_->size()); }
  int stage() const { return replica_group_->rank(); }
  int replica() const { return stage_group_->rank(); }
  Pipeline& pipeline() { return pipe_; }

  // Step k on `global` (the same batch on every rank); skipped as above.
  HybridStepStats step(const Batch& global, std::uint64_t k);
  // Forward only on replica 0: the logits on its last stage, empty elsewhere.
  // Every rank calls it; with table-wise tables, after gather_tables().
  std::vector<float> predict(const Batch& batch);
  // Table-wise: brings every table (and its optimizer state) to replica 0's
  // middle stage, for testing or saving. Every rank calls it.
  void gather_tables();
  // Hash of this stage's replicated parameters (dense, and the tables unless
  // table-wise), to compare among its replicas; verify() throws when they differ.
  void verify(std::uint64_t step);
  // This rank's codec state (gradient exchange, sparse allreduce plan, the
  // pipeline's residuals), as DataParallel::save_state().
  std::vector<std::byte> save_state() const;
  void load_state(std::span<const std::byte> blob);
  // The state of rank `rank` of `ranks` (replicas of `stages` stages, fewer
  // than saved) from what every rank of a run with more replicas saved: its
  // stage's exchange state folded over the replicas as DataParallel's
  // (GradExchange::repartition_state); the cuts' residuals start from zero
  // (they belong to positions in micro-batches whose size changes with the
  // replicas).
  static std::vector<std::byte> repartition_state(std::span<const std::vector<std::byte>> saved, std::size_t rank,
                                                  std::size_t ranks, std::size_t stages);

 private:
  Dlrm<float>& model_;
  Optimizer<float>& opt_;
  std::unique_ptr<GroupTransport> replica_group_, stage_group_;
  Pipeline pipe_;
  GradExchange exchange_;
  std::vector<GradExchange::Piece> pieces_;  // the stage's dense views, one bucket
  std::string bucket_name_;
  std::optional<TableWise> table_wise_;  // the middle stage, table-wise placement
  std::vector<float> pooled_;
  Batch local_;
  bool skip_non_finite_;
  compress::ValueFormat emb_grad_values_;  // replicated tables: their gradients' exchange
  // Whether any rank's cuts or gradients held a NaN or inf this step (every
  // rank calls it).
  bool any_rank_non_finite();
};

// Checkpoints of model-parallel runs hold the whole model, as any other:
// replica 0's stages (ranks 0..M-1 of `world`) send their parameters and
// optimizer state to rank 0, which puts them into `whole` / `whole_opt` (a
// model built without a stage; null on the other ranks). Every rank calls it.
void gather_whole(Transport& world, const std::vector<DlrmStage>& plan, const Dlrm<float>& stage,
                  Optimizer<float>& stage_opt, Dlrm<float>* whole, Optimizer<float>* whole_opt);

// The other way (--load): this stage's part of a whole model and its state.
void copy_stage(const Dlrm<float>& whole, Optimizer<float>& whole_opt, Dlrm<float>& stage, Optimizer<float>& stage_opt);

}  // namespace sparq
