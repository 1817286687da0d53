#pragma once
// DLRM (Naumov et al. 2019) as in the reference dlrm_s_pytorch.py:
//
//   dense [B x nd] -> bottom MLP (ReLU after every layer) -> x [B x d]
//   bags of table t -> EmbeddingBag t (sum) -> e_t [B x d]
//   V = [x; e_1..e_m] -> DotInteraction -> r [B x (d + (m+1)m/2)]
//   r -> top MLP (ReLU except the last layer) -> logit [B x 1]
//   loss = BCE(sigmoid(logit), y), computed from the logit (loss.h)
//
// The dense parameters (both MLPs) live in one DenseParams buffer:
// "bot.<l>.weight", "bot.<l>.bias", "top.<l>.weight", "top.<l>.bias".
// Embedding tables are separate (large, updated sparsely).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sparq/data/batch.h"
#include "sparq/model/dense_params.h"
#include "sparq/model/embedding.h"
#include "sparq/model/interaction.h"
#include "sparq/model/mlp.h"

namespace sparq {

struct DlrmConfig {
  std::vector<std::size_t> bot_mlp{13, 512, 256, 64, 16};  // includes the input width (dense features)
  std::vector<std::size_t> top_mlp{512, 256, 1};           // excludes its input (the interaction width)
  std::vector<std::size_t> table_rows;                     // one per table
  std::size_t emb_dim = 16;
  GemmPrecision mlp_precision = GemmPrecision::fp32;  // of both MLPs' GEMMs (--mlp-precision)

  std::size_t num_dense() const { return bot_mlp.empty() ? 0 : bot_mlp.front(); }
  std::size_t num_tables() const { return table_rows.size(); }
  std::size_t interaction_width() const { return emb_dim + (num_tables() + 1) * num_tables() / 2; }
  MlpSpec bot_spec() const { return {bot_mlp, true, mlp_precision}; }
  MlpSpec top_spec() const;
  // Throws InputError when the widths do not fit together.
  void validate() const;
  std::string describe() const;  // "bot 13-512-256-64-16, top 367-512-256-1, 26 tables x 16"
};

// "13-512-256-64-16" -> {13, 512, 256, 64, 16}; throws InputError.
std::vector<std::size_t> parse_dash_list(const std::string& s);
// The inverse: {13, 512, 256} -> "13-512-256".
std::string join_dash_list(const std::vector<std::size_t>& v);

// A contiguous piece of the model, for model parallelism: bottom layers
// [bot_first, bot_last), then, if `middle`, the embedding tables and the
// interaction, then top layers [top_first, top_last). The middle needs the
// bottom MLP's end before it and the top MLP's start after it, so a stage
// either holds the middle or only bottom layers or only top layers.
struct DlrmStage {
  static constexpr std::size_t kEnd = std::numeric_limits<std::size_t>::max();
  std::size_t bot_first = 0, bot_last = kEnd;
  bool middle = true;
  std::size_t top_first = 0, top_last = kEnd;
  bool operator==(const DlrmStage&) const = default;
};

// "bot:2,top:2" -> the stages of a model cut after the 2nd bottom layer and
// after the 2nd top layer (3 stages, the DCT paper's Figure 6). "bot:i" cuts
// after bottom layer i (1 <= i <= bottom layers), "top:j" after top layer j
// (0 <= j < top layers; 0 cuts between the interaction and the top MLP).
// "" = one stage, the whole model. Throws InputError.
std::vector<DlrmStage> plan_stages(const DlrmConfig& cfg, std::string_view splits);

template <class T>
class Dlrm {
 public:
  // Builds and initialises (reference init) from `seed`: bottom layer l uses
  // stream l, top layer l stream 1000 + l, table t stream 1000000 + t; a
  // stage holds exactly the parameters of its part of the whole model.
  // `hold` (one flag per table; empty: all) leaves the other tables without
  // storage: their shape stays, their weights() are empty.
  Dlrm(const DlrmConfig& cfg, std::uint64_t seed, DlrmStage stage = {}, const std::vector<bool>& hold = {});
  Dlrm(const Dlrm&) = delete;
  Dlrm& operator=(const Dlrm&) = delete;

  // Whole model only. batch -> logits [B]; valid until the next forward().
  std::span<const T> forward(const Batch& batch);

  // Table-wise placement: the pooled embeddings pooled [B x m x d] come from
  // the tables' owners instead of this model's tables (batch.sparse is not
  // read). The next backward() computes no table gradients; pooled_grad()
  // then gives dLoss/d(pooled).
  std::span<const T> forward(const Batch& batch, std::span<const T> pooled);
  // The same, with the lookups asked for only once the bottom MLP has run,
  // so that the exchange bringing them overlaps it: `pooled` may block until
  // they arrive; what it returns must stay valid until backward() is done.
  std::span<const T> forward(const Batch& batch, const std::function<std::span<const T>()>& pooled);
  // dLoss/d(pooled) of the last backward(), where it lies (no copy): sample
  // i's m x d values at data + i * ld; valid until the next step.
  struct PooledGrad {
    const T* data = nullptr;
    std::size_t rows = 0, ld = 0;
  };
  PooledGrad pooled_grad() const;
  // Table-wise: called inside backward() as soon as pooled_grad() is
  // complete, before the bottom MLP's backward, so that the gradients'
  // exchange overlaps it. nullptr: none.
  void set_pooled_grad_hook(std::function<void()> h) { pooled_grad_hook_ = std::move(h); }
  // Tables held here: called inside backward() as soon as every table's
  // sparse_grad() is complete, also before the bottom MLP's backward, so that
  // their exchange overlaps it. nullptr: none.
  void set_sparse_grad_hook(std::function<void()> h) { sparse_grad_hook_ = std::move(h); }

  // dlogits [B] (dLoss/dlogit) -> overwrites all dense gradients and each
  // table's sparse gradient for the batch of the last forward().
  void backward(std::span<const T> dlogits);
  // The gradients of no samples: every dense gradient zero, every table's
  // sparse gradient empty (a rank whose share of a batch is empty still
  // takes part in the exchanges).
  void zero_grads();

  // Model parallelism, one step of a stage over `micro_batches` micro-batches
  // (samples split by pattern::Partition):
  //   stage_begin(batch, M); stage_forward(mb, x) for every mb;
  //   stage_backward(mb, dy) for every mb (any order); stage_end().
  // x is the activation from the previous stage [b_mb x in_width] (nullptr
  // on the first stage, which reads the batch's dense features); the result
  // is [b_mb x out_width] (the logits on the last stage). stage_backward
  // takes dLoss/d(output) and returns dLoss/d(x) (nullptr on the first
  // stage); gradients accumulate over the micro-batches. The last
  // micro-batch's stage_backward also computes the tables' gradients over
  // the whole batch; stage_end() checks that every micro-batch's ran.
  const DlrmStage& stage() const { return stage_; }
  std::size_t stage_in_width() const;   // 0 on the first stage
  std::size_t stage_out_width() const;  // 1 on the last stage
  // `pooled` (the middle stage, table-wise placement): the lookups of the
  // whole batch [B x m x d] come from it, asked for once, after the first
  // micro-batch's bottom layers, instead of from this stage's tables; the
  // tables' gradients are then left to their owners (pooled_grad()).
  using PooledSource = std::function<std::span<const T>()>;
  void stage_begin(const Batch& batch, std::size_t micro_batches, const PooledSource* pooled = nullptr);
  std::span<const T> stage_forward(std::size_t mb, const T* x);
  const T* stage_backward(std::size_t mb, const T* dy);
  void stage_end();
  std::size_t micro_size(std::size_t mb) const;

  const DlrmConfig& config() const { return cfg_; }
  DenseParams<T>& dense() { return *dense_; }
  const DenseParams<T>& dense() const { return *dense_; }
  std::vector<EmbeddingBag<T>>& tables() { return tables_; }
  const std::vector<EmbeddingBag<T>>& tables() const { return tables_; }
  const SparseGrad<T>& sparse_grad(std::size_t t) const { return sgrads_[t]; }
  // Mutable, so data parallelism can replace it by the average over ranks.
  SparseGrad<T>& sparse_grad(std::size_t t) { return sgrads_[t]; }

  // Both MLPs report each layer's finished gradients (Mlp::set_grad_hook):
  // the top MLP's last layer first, the bottom MLP's first layer last, which
  // is the reverse of the store's view order.
  void set_grad_hook(const typename Mlp<T>::GradHook& h) {
    top_->set_grad_hook(h);
    bot_->set_grad_hook(h);
  }

  // When enabled, backward() also computes dLoss/d(dense input) [B x nd]
  // (for gradient checks; costs one extra GEMM).
  void set_input_grad(bool on) { want_input_grad_ = on; }
  std::span<const T> input_grad() const { return input_grad_; }

  // Multiply-adds of one sample's forward pass through this model's MLP layers.
  std::size_t mlp_macs_per_sample() const { return bot_->macs_per_sample() + top_->macs_per_sample(); }

 private:
  void tables_backward();  // sgrads_ from the whole batch's lookups' gradients
  // One micro-batch in flight.
  struct Micro {
    typename Mlp<T>::Tape bot, top;
    std::vector<T> v;    // [b x (m+1) x d]: bottom output, then the pooled lookups
    std::vector<T> r;    // [b x interaction width]
    std::vector<T> dv;   // [b x (m+1) x d]
    std::vector<T> dx;   // [b x d], bottom output gradient (contiguous)
  };
  bool whole() const;
  bool first_stage() const { return stage_.bot_first == 0 && stage_.bot_last > 0; }

  DlrmConfig cfg_;
  DlrmStage stage_;
  std::unique_ptr<DenseParams<T>> dense_;  // stable address: the MLPs point to it
  std::unique_ptr<Mlp<T>> bot_, top_;
  std::vector<EmbeddingBag<T>> tables_;    // the middle stage's only
  DotInteraction<T> inter_;
  const Batch* batch_ = nullptr;
  std::size_t B_ = 0, M_ = 1, mb_done_ = 0;
  std::vector<Micro> micro_;
  std::vector<T> xin_;      // dense input converted to T (only when T != float)
  std::vector<T> pooled_;   // [B x m x d] lookups: given (table-wise) or of the whole batch (M > 1)
  std::vector<T> dpooled_;  // [B x m x d] their gradients (M > 1; with M = 1 they stay in the interaction's)
  bool external_pooled_ = false;
  PooledSource ext_source_;        // table-wise: where the lookups come from ...
  std::span<const T> ext_pooled_;  // ... and what it gave this step
  bool ext_fetched_ = false;
  std::function<void()> pooled_grad_hook_, sparse_grad_hook_;
  std::vector<T> input_grad_;
  std::vector<SparseGrad<T>> sgrads_;
  bool want_input_grad_ = false;
};

}  // namespace sparq
