#pragma once
// Optimizers. Dense parameters (the whole contiguous buffer): SGD (as the
// papers), or Adagrad / Adam exactly as PyTorch's torch.optim.Adagrad and
// torch.optim.Adam with their defaults (no weight decay, no lr decay, no
// amsgrad), element-wise over the buffer. Embedding tables: SGD on the
// touched rows, or row-wise Adagrad (one accumulator per row, as FBGEMM/DLRM
// production setups use):
//   s_r += mean_j g_rj^2 ;   w_r -= lr * g_r / (sqrt(s_r) + eps)
// which costs 4 bytes per row of state instead of Adagrad's 4 per element.
// Both learning rates follow the LrSchedule (the reference has one optimizer
// for all parameters, so one schedule scales both).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "sparq/model/dlrm.h"
#include "sparq/model/lr_schedule.h"

namespace sparq {

enum class EmbeddingOptim { Sgd, RowwiseAdagrad };
EmbeddingOptim parse_embedding_optim(std::string_view s);  // "sgd" | "rowwise-adagrad"; throws InputError
std::string_view embedding_optim_name(EmbeddingOptim o);

enum class DenseOptim { Sgd, Adagrad, Adam };
DenseOptim parse_dense_optim(std::string_view s);  // "sgd" | "adagrad" | "adam"; throws InputError
std::string_view dense_optim_name(DenseOptim o);
// Vectors of state (each the dense buffer's size): Adagrad its sum of
// squares, Adam exp_avg and exp_avg_sq.
std::size_t dense_state_vectors(DenseOptim o);

// PyTorch's defaults.
inline constexpr double kAdagradEps = 1e-10;
inline constexpr double kAdamBeta1 = 0.9, kAdamBeta2 = 0.999, kAdamEps = 1e-8;

struct OptimizerOptions {
  double lr = 0.01;             // dense and embedding learning rate
  double embedding_lr = -1.0;   // < 0: same as lr
  EmbeddingOptim embedding = EmbeddingOptim::Sgd;
  double adagrad_eps = 1e-8;    // row-wise Adagrad of the tables
  DenseOptim dense = DenseOptim::Sgd;
  LrSchedule schedule = {};
  // Keep a bit a table row, set where an update writes the row, for
  // take_changed_rows() (incremental checkpoints); off, step() does no more.
  bool track_changes = false;
};

template <class T>
void sgd_dense(std::span<T> params, std::span<const T> grads, T lr);

// One update of a dense buffer with `o` at rate `lr`; `state` holds
// dense_state_vectors(o) vectors of params.size(); `t` is the update's number
// (1-based: Adam's bias correction).
template <class T>
void dense_update(DenseOptim o, std::span<T> params, std::span<const T> grads, std::span<std::vector<T>> state,
                  double lr, std::uint64_t t);

template <class T>
void sgd_rows(EmbeddingBag<T>& table, const SparseGrad<T>& g, T lr);

template <class T>
void rowwise_adagrad_rows(EmbeddingBag<T>& table, std::span<T> state, const SparseGrad<T>& g, T lr, T eps);

// Applies one update from the gradients of the model's last backward().
template <class T>
class Optimizer {
 public:
  Optimizer(const OptimizerOptions& opts, Dlrm<T>& model);
  void step();
  const OptimizerOptions& options() const { return opts_; }
  // Updates applied so far; the next is update steps() + 1 of the schedule
  // and of Adam's bias correction. A resumed run sets it to the checkpoint's.
  std::uint64_t steps() const { return steps_; }
  void set_steps(std::uint64_t n) { steps_ = n; }
  // All state, in checkpoint order: per table its row-wise Adagrad
  // accumulators (none for SGD), then the dense optimizer's vectors.
  std::vector<std::vector<T>>& state() { return state_; }
  std::span<std::vector<T>> table_state() { return std::span(state_).first(table_vectors_); }
  std::span<std::vector<T>> dense_state() { return std::span(state_).subspan(table_vectors_); }
  // The rows of held table t that step() has updated since the last call
  // (ascending), for checkpoints that write only what changed; needs
  // OptimizerOptions::track_changes.
  std::vector<std::uint32_t> take_changed_rows(std::size_t t) {
    std::vector<std::uint32_t> rows;
    take_changed_rows(t, rows);
    return rows;
  }
  void take_changed_rows(std::size_t t, std::vector<std::uint32_t>& rows);  // into `rows`, its memory reused

 private:
  OptimizerOptions opts_;
  Dlrm<T>* model_;
  std::vector<std::vector<T>> state_;
  std::size_t table_vectors_ = 0;
  std::uint64_t steps_ = 0;
  std::vector<std::vector<std::uint64_t>> changed_;  // per table, a bit a row (none for another's table)
};

}  // namespace sparq
