#pragma once
// One data-parallel training step. Every rank runs forward and backward on
// its share of the global batch (pattern::Partition: shares differ by at most
// one sample). The dense gradients are exchanged with the --dp-codec layer by
// layer as backward produces them (last layer first), on a communication
// thread (CommEngine), so a layer's exchange overlaps the backward pass of
// the layers below it; --fuse-bytes groups adjacent layers into one exchange.
// Embeddings are either
//   replicated: every rank holds every table; each table's row-sparse
//     gradient is summed with the row-sparse allreduce (`emb_grad`), or
//   table-wise: every table lives on one rank (TableWise): the pooled
//     lookups travel by alltoall forward (`emb_fwd`) and their gradients
//     back (`emb_bwd`), each optionally quantized.
//
// With equal shares and every codec off, P ranks compute the gradient of the
// global batch's mean loss, so training equals single-rank training at the
// global batch size up to float summation order (tests/train).
#include <deque>
#include <memory>
#include <optional>

#include "sparq/coll/comm_engine.h"
#include "sparq/compress/stream_size.h"
#include "sparq/data/batch.h"
#include "sparq/model/dlrm.h"
#include "sparq/model/optimizer.h"
#include "sparq/train/grad_exchange.h"
#include "sparq/train/table_wise.h"

namespace sparq {

enum class EmbPlacement { Replicated, TableWise };
EmbPlacement parse_emb_placement(std::string_view s);  // "replicated", "table-wise"; throws InputError
std::string_view emb_placement_name(EmbPlacement p);

// Whether this rank's gradients of the step just computed hold a NaN or inf:
// the dense ones, and the tables' part: their lookups' gradients where
// `lookups` is given (table-wise), else the tables' row-sparse gradients.
bool gradients_hold_non_finite(Dlrm<float>& model, const Dlrm<float>::PooledGrad* lookups);

struct DataParallelOptions {
  DpCodec codec{};                 // dense gradients
  EmbPlacement placement = EmbPlacement::Replicated;
  Codec emb_fwd{}, emb_bwd{};      // table-wise: alltoall codecs of lookups and their gradients
  compress::ValueFormat emb_grad_values = compress::ValueFormat::F32;  // replicated: the gradients' row-sparse allreduce values
  std::size_t emb_row_len = 32;    // table-wise: values per quantization row (fp16 scale and bias each)
  bool overlap = true;             // exchange layers during backward (false: all after it)
  std::size_t fuse_bytes = 0;      // exchange adjacent layers together until a group holds this many bytes
  int comm_nice = 0;               // the communication thread's nice value (CommEngine), in [-20, 0]
  // --non-finite skip: a step whose gradients hold a NaN or inf on any rank
  // is skipped on every rank (no exchange, no update, no codec state
  // change), as AMP's GradScaler skips one; otherwise (fail) the exchange
  // that meets it throws NonFiniteError. Skipping decides after the backward
  // pass, with one 4-byte allreduce, so the exchanges no longer overlap it.
  bool skip_non_finite = false;
};

struct DpStepStats {
  double loss = 0;          // this rank's mean loss on its share
  std::size_t correct = 0;  // its predictions that equal the label
  ExchangeStats w_grad;     // dense gradients
  ExchangeStats emb_grad;   // replicated embeddings: gradient sparse allreduce
  ExchangeStats emb_fwd;    // table-wise: lookups alltoall
  ExchangeStats emb_bwd;    // table-wise: lookup gradients alltoall
  double forward_s = 0, backward_s = 0, optimizer_s = 0;  // waiting on exchanges is in their wait_seconds
  ModeledPhases modeled;  // on a virtual clock
  bool skipped = false;   // skip_non_finite: a rank's gradients held a NaN or inf; nothing changed
};

class DataParallel {
 public:
  // All references must outlive this object; `residuals` holds the codec's
  // error-feedback state. Between step() calls the transport is free for
  // other use (no collective is in flight then).
  DataParallel(Transport& t, Dlrm<float>& model, Optimizer<float>& opt, DataParallelOptions opts,
               compress::ErrorFeedbackStore& residuals);
  ~DataParallel();

  // Step k on `global` (the same batch on every rank; this rank trains on its
  // share). On one rank nothing is exchanged. With skip_non_finite a step
  // may be skipped (DpStepStats::skipped): then the model, the optimizer
  // and the codecs are as before it, and the next step should pass k again.
  DpStepStats step(const Batch& global, std::uint64_t k);
  // Empty, or why the communication thread runs at its default priority
  // instead of opts.comm_nice (CommEngine::priority_note).
  std::string comm_priority_note() const { return engine_ ? engine_->priority_note() : std::string(); }
  // What step() reads of a global batch of `size` samples: this rank's share,
  // and the ids of the tables it owns (table-wise) for all samples.
  BatchPart batch_part(std::size_t size) const;

  // Table-wise: brings every table (and its optimizer state) to `root`, so
  // that it can test or save the whole model. Every rank calls it.
  void gather_model(int root);

  // Hash of what every rank must hold bit for bit: the dense parameters, and
  // the tables when they are replicated.
  std::uint64_t replica_hash() const;

  const DataParallelOptions& options() const { return opts_; }

  // This rank's codec state (the gradient exchange's, and the replicated
  // tables' sparse allreduce plan), for checkpoints: load_state() of a blob
  // that this rank saved under the same options continues bit for bit.
  std::vector<std::byte> save_state() const;
  void load_state(std::span<const std::byte> blob);
  // Rank `rank` of `ranks`' state from the states of a run on more ranks
  // (GradExchange::repartition_state).
  static std::vector<std::byte> repartition_state(std::span<const std::vector<std::byte>> saved, std::size_t rank,
                                                  std::size_t ranks);

 private:
  struct Bucket {
    std::size_t lo = 0, hi = 0;              // range of the dense gradient buffer
    std::string name;                        // its views' names joined by '+' (keys the quantized codecs' residuals)
    std::vector<GradExchange::Piece> pieces;  // its views, in buffer order
  };
  enum class Entity { WGrad, EmbGrad, EmbFwd, EmbBwd };
  struct Slot {
    Entity entity;
    ExchangeStats stats;
  };
  // The wall clock and the modelled time (0 on real transports), for the
  // phases in both.
  struct Stamp {
    Clock::time_point wall;
    double modeled;
  };
  Stamp now() const;
  // Forward (timed from `start`) and backward on this rank's share; returns
  // the seconds forward waited for the lookups.
  double forward_backward(const Batch& local, std::size_t global_size, Stamp start, DpStepStats& st);
  // Submits what the hooks did not (all of it without overlap) and waits for
  // every exchange of the step, in submission order.
  void wait_exchanges(bool computed, double fwd_wait, DpStepStats& st);
  // skip_non_finite: whether any rank's gradients of this step hold a NaN or
  // inf (every rank calls it; one allreduce on the communication thread).
  bool any_rank_non_finite(bool computed);
  // Dense gradient view v is final: add it to the open group, exchange the
  // group once it holds --fuse-bytes.
  void view_ready(std::size_t v);
  void submit_bucket();
  // Table-wise: this step's lookup gradients are final; send them to the owners.
  void pooled_grad_ready();
  // Replicated: this step's tables' gradients are final; one row-sparse allreduce of them all.
  void submit_emb_grad();
  static ExchangeStats& slot_total(DpStepStats& st, Entity e);
  // Runs `f` on the communication thread; its stats land in a new slot.
  void submit(Entity e, std::function<ExchangeStats(Transport&)> f);

  Transport& t_;
  Dlrm<float>& model_;
  Optimizer<float>& opt_;
  DataParallelOptions opts_;
  GradExchange exchange_;
  std::optional<TableWise> table_wise_;
  std::unique_ptr<CommEngine> engine_;
  Batch local_;
  std::vector<float> dlogits_, pooled_;
  std::uint64_t k_ = 0;
  Bucket open_;                      // layers waiting to be exchanged together
  std::deque<Slot> slots_;           // this step's exchanges, in submission order (stable addresses)
  std::vector<Work> works_;
};

}  // namespace sparq
