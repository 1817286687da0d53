#include "sparq/train/data_parallel.h"

#include <algorithm>

#include "sparq/model/loss.h"
#include "sparq/train/emb_grad_exchange.h"

namespace sparq {

DataParallel::DataParallel(Transport& t, Dlrm<float>& model, Optimizer<float>& opt, const DpCodec& codec,
                           compress::ErrorFeedbackStore& residuals)
    : t_(t), model_(model), opt_(opt), exchange_(codec, residuals) {}

namespace {
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

DpStepStats DataParallel::step(const Batch& local, std::size_t global_size, std::uint64_t k) {
  SPARQ_CHECK(global_size >= local.size && global_size > 0, "data-parallel share of {} samples of {}", local.size,
              global_size);
  DpStepStats st;
  const int p = t_.size();
  auto t0 = Clock::now();
  if (local.size == 0) {
    // A global batch smaller than the rank count (an epoch's last): this
    // rank contributes zero gradients but still takes part in the exchange.
    std::fill(model_.dense().grads().begin(), model_.dense().grads().end(), 0.0f);
    for (std::size_t tb = 0; tb < model_.tables().size(); ++tb) {
      model_.sparse_grad(tb).rows.clear();
      model_.sparse_grad(tb).values.clear();
    }
  } else {
    const auto logits = model_.forward(local);
    st.forward_s = since(t0);
    t0 = Clock::now();
    dlogits_.resize(local.size);
    st.loss = bce_with_logits<float>(logits, local.labels, dlogits_);
    // dlogits = (sigmoid - y) / local: rescale to (sigmoid - y) / global * P,
    // so that the exchange's average over P ranks sums to the global mean.
    if (p > 1) {
      const float w = static_cast<float>(static_cast<double>(local.size) * p / static_cast<double>(global_size));
      if (w != 1.0f)
        for (float& d : dlogits_) d *= w;
    }
    model_.backward(dlogits_);
    st.backward_s = since(t0);
  }
  if (p > 1) {
    DenseParams<float>& dense = model_.dense();
    for (std::size_t i = dense.views().size(); i-- > 0;)
      st.w_grad += exchange_.exchange(t_, dense.views()[i].name, dense.grad(i), k);
    for (std::size_t tb = 0; tb < model_.tables().size(); ++tb)
      st.emb_grad += exchange_embedding_grad(t_, model_.sparse_grad(tb), model_.tables()[tb].rows(),
                                            model_.tables()[tb].dim());
  }
  t0 = Clock::now();
  opt_.step();
  st.optimizer_s = since(t0);
  return st;
}

}  // namespace sparq
