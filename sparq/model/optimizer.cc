#include "sparq/model/optimizer.h"

#include <bit>
#include <cmath>
#include <utility>

#include "sparq/core/error.h"
#include "sparq/core/kernel_costs.h"
#include "sparq/model/kernels.h"
#include "sparq/model/parallel.h"

namespace sparq {

EmbeddingOptim parse_embedding_optim(std::string_view s) {
  if (s == "sgd") return EmbeddingOptim::Sgd;
  if (s == "rowwise-adagrad") return EmbeddingOptim::RowwiseAdagrad;
  SPARQ_THROW(InputError, "unknown embedding optimizer '{}' (sgd, rowwise-adagrad)", s);
}

std::string_view embedding_optim_name(EmbeddingOptim o) {
  return o == EmbeddingOptim::Sgd ? "sgd" : "rowwise-adagrad";
}

DenseOptim parse_dense_optim(std::string_view s) {
  if (s == "sgd") return DenseOptim::Sgd;
  if (s == "adagrad") return DenseOptim::Adagrad;
  if (s == "adam") return DenseOptim::Adam;
  SPARQ_THROW(InputError, "unknown optimizer '{}' (sgd, adagrad, adam)", s);
}

std::string_view dense_optim_name(DenseOptim o) {
  return o == DenseOptim::Sgd ? "sgd" : o == DenseOptim::Adagrad ? "adagrad" : "adam";
}

std::size_t dense_state_vectors(DenseOptim o) { return o == DenseOptim::Sgd ? 0 : o == DenseOptim::Adagrad ? 1 : 2; }

template <class T>
void sgd_dense(std::span<T> params, std::span<const T> grads, T lr) {
  SPARQ_CHECK(params.size() == grads.size(), "params {} vs grads {}", params.size(), grads.size());
  parallel_for(params.size(), std::size_t{1} << 16, [&](std::size_t i0, std::size_t i1) {
    const ChargedKernel charged("sgd_dense_per_value", Units{i1 - i0}, sizeof(T));
    kernels::sub_scaled(params.data() + i0, grads.data() + i0, lr, i1 - i0);
  });
}

template <class T>
void dense_update(DenseOptim o, std::span<T> params, std::span<const T> grads, std::span<std::vector<T>> state,
                  double lr, std::uint64_t t) {
  SPARQ_CHECK(params.size() == grads.size(), "params {} vs grads {}", params.size(), grads.size());
  SPARQ_CHECK(state.size() == dense_state_vectors(o), "{} needs {} state vectors, got {}", dense_optim_name(o),
              dense_state_vectors(o), state.size());
  for (const auto& s : state) SPARQ_CHECK(s.size() == params.size(), "state of {} for {} params", s.size(), params.size());
  constexpr std::size_t grain = std::size_t{1} << 16;
  if (o == DenseOptim::Sgd) {
    sgd_dense<T>(params, grads, static_cast<T>(lr));
  } else if (o == DenseOptim::Adagrad) {
    parallel_for(params.size(), grain, [&](std::size_t i0, std::size_t i1) {
      const ChargedKernel charged("adagrad_dense_per_value", Units{i1 - i0}, sizeof(T));
      kernels::adagrad(params.data() + i0, grads.data() + i0, state[0].data() + i0, static_cast<T>(lr),
                       static_cast<T>(kAdagradEps), i1 - i0);
    });
  } else {
    // The per-update scalars in double, as PyTorch's Python computes them.
    const double n = static_cast<double>(t);
    const kernels::AdamCoeffs k{.beta1 = kAdamBeta1,
                                .c1 = 1 - kAdamBeta1,
                                .beta2 = kAdamBeta2,
                                .c2 = 1 - kAdamBeta2,
                                .step = lr / (1 - std::pow(kAdamBeta1, n)),
                                .bc2 = std::sqrt(1 - std::pow(kAdamBeta2, n)),
                                .eps = kAdamEps};
    parallel_for(params.size(), grain, [&](std::size_t i0, std::size_t i1) {
      const ChargedKernel charged("adam_dense_per_value", Units{i1 - i0}, sizeof(T));
      kernels::adam(params.data() + i0, grads.data() + i0, state[0].data() + i0, state[1].data() + i0, k, i1 - i0);
    });
  }
}

template <class T>
void sgd_rows(EmbeddingBag<T>& table, const SparseGrad<T>& g, T lr) {
  const std::size_t d = table.dim();
  const std::size_t ahead = EmbeddingBag<T>::kPrefetchAhead;
  const ChargedKernel charged("sgd_rows_per_value", Units{g.values.size()}, d, sizeof(T));
  for (std::size_t i = 0; i < g.rows.size(); ++i) {
    if (i + ahead < g.rows.size()) table.prefetch(g.rows[i + ahead]);
    kernels::sub_scaled(table.row(g.rows[i]).data(), g.values.data() + i * d, lr, d);
  }
}

template <class T>
void rowwise_adagrad_rows(EmbeddingBag<T>& table, std::span<T> state, const SparseGrad<T>& g, T lr, T eps) {
  const std::size_t d = table.dim();
  SPARQ_CHECK(state.size() == table.rows(), "adagrad state {} for {} rows", state.size(), table.rows());
  const ChargedKernel charged("adagrad_rows_per_value", Units{g.values.size()}, d, sizeof(T));
  for (std::size_t i = 0; i < g.rows.size(); ++i) {
    if (i + EmbeddingBag<T>::kPrefetchAhead < g.rows.size()) table.prefetch(g.rows[i + EmbeddingBag<T>::kPrefetchAhead]);
    const std::uint32_t r = g.rows[i];
    T* w = table.row(r).data();
    const T* gr = g.values.data() + i * d;
    T sq = T(0);
    for (std::size_t j = 0; j < d; ++j) sq += gr[j] * gr[j];
    state[r] += sq / static_cast<T>(d);
    const T scale = lr / (std::sqrt(state[r]) + eps);
    for (std::size_t j = 0; j < d; ++j) w[j] -= scale * gr[j];
  }
}

template <class T>
Optimizer<T>::Optimizer(const OptimizerOptions& opts, Dlrm<T>& model) : opts_(opts), model_(&model) {
  if (opts_.embedding_lr < 0) opts_.embedding_lr = opts_.lr;
  opts_.schedule.validate();
  if (opts_.embedding == EmbeddingOptim::RowwiseAdagrad)
    for (const auto& t : model.tables()) state_.emplace_back(t.held() ? t.rows() : 0, T(0));  // none for another's table
  table_vectors_ = state_.size();
  for (std::size_t i = 0; i < dense_state_vectors(opts_.dense); ++i) state_.emplace_back(model.dense().size(), T(0));
  if (opts_.track_changes)
    for (const auto& t : model.tables()) changed_.emplace_back(t.held() ? (t.rows() + 63) / 64 : 0, 0);
}

template <class T>
void Optimizer<T>::take_changed_rows(std::size_t t, std::vector<std::uint32_t>& rows) {
  SPARQ_CHECK(opts_.track_changes, "take_changed_rows: the optimizer does not track changed rows");
  rows.clear();
  auto& bits = changed_.at(t);
  for (std::size_t w = 0; w < bits.size(); ++w)
    for (std::uint64_t b = std::exchange(bits[w], 0); b != 0; b &= b - 1)
      rows.push_back(static_cast<std::uint32_t>(64 * w + static_cast<std::size_t>(std::countr_zero(b))));
}

template <class T>
void Optimizer<T>::step() {
  const std::uint64_t t = ++steps_;
  auto& dense = model_->dense();
  dense_update<T>(opts_.dense, dense.params(), dense.grads(), dense_state(), opts_.schedule.lr(opts_.lr, t), t);
  auto& tables = model_->tables();
  const T elr = static_cast<T>(opts_.schedule.lr(opts_.embedding_lr, t));
  parallel_for(tables.size(), 4, [&](std::size_t t0, std::size_t t1) {  // tables are independent
    for (std::size_t t = t0; t < t1; ++t) {
      if (!tables[t].held()) {  // another rank's table (table-wise): it is updated there
        SPARQ_CHECK(model_->sparse_grad(t).rows.empty(), "a gradient for table {}, which this rank does not hold", t);
        continue;
      }
      if (opts_.track_changes)
        for (const std::uint32_t r : model_->sparse_grad(t).rows) changed_[t][r / 64] |= std::uint64_t{1} << (r % 64);
      if (opts_.embedding == EmbeddingOptim::Sgd)
        sgd_rows(tables[t], model_->sparse_grad(t), elr);
      else
        rowwise_adagrad_rows(tables[t], std::span<T>(state_[t]), model_->sparse_grad(t), elr,
                             static_cast<T>(opts_.adagrad_eps));
    }
  });
}

template void sgd_dense<float>(std::span<float>, std::span<const float>, float);
template void sgd_dense<double>(std::span<double>, std::span<const double>, double);
template void dense_update<float>(DenseOptim, std::span<float>, std::span<const float>, std::span<std::vector<float>>,
                                  double, std::uint64_t);
template void dense_update<double>(DenseOptim, std::span<double>, std::span<const double>,
                                   std::span<std::vector<double>>, double, std::uint64_t);
template void sgd_rows<float>(EmbeddingBag<float>&, const SparseGrad<float>&, float);
template void sgd_rows<double>(EmbeddingBag<double>&, const SparseGrad<double>&, double);
template void rowwise_adagrad_rows<float>(EmbeddingBag<float>&, std::span<float>, const SparseGrad<float>&, float, float);
template void rowwise_adagrad_rows<double>(EmbeddingBag<double>&, std::span<double>, const SparseGrad<double>&, double,
                                           double);
template class Optimizer<float>;
template class Optimizer<double>;

}  // namespace sparq
