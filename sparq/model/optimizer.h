#pragma once
// Optimizers. Dense parameters: plain SGD over the whole contiguous buffer
// (as the papers). Embedding tables: SGD on the touched rows, or row-wise
// Adagrad (one accumulator per row, as FBGEMM/DLRM production setups use):
//   s_r += mean_j g_rj^2 ;   w_r -= lr * g_r / (sqrt(s_r) + eps)
// which costs 4 bytes per row of state instead of Adagrad's 4 per element.
#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

#include "sparq/model/dlrm.h"

namespace sparq {

enum class EmbeddingOptim { Sgd, RowwiseAdagrad };
EmbeddingOptim parse_embedding_optim(std::string_view s);  // "sgd" | "rowwise-adagrad"; throws InputError
std::string_view embedding_optim_name(EmbeddingOptim o);

struct OptimizerOptions {
  double lr = 0.01;             // dense and embedding learning rate
  double embedding_lr = -1.0;   // < 0: same as lr
  EmbeddingOptim embedding = EmbeddingOptim::Sgd;
  double adagrad_eps = 1e-8;
};

template <class T>
void sgd_dense(std::span<T> params, std::span<const T> grads, T lr);

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
  // Row-wise Adagrad accumulators, one vector per table (empty for SGD).
  std::vector<std::vector<T>>& state() { return state_; }

 private:
  OptimizerOptions opts_;
  Dlrm<T>* model_;
  std::vector<std::vector<T>> state_;
};

}  // namespace sparq
