#include "sparq/train/data_parallel.h"

#include "sparq/model/loss.h"
#include "sparq/train/emb_grad_exchange.h"

namespace sparq {

DataParallel::DataParallel(Transport& t, Dlrm<float>& model, Optimizer<float>& opt, const DpCodec& codec,
                           compress::ErrorFeedbackStore& residuals)
    : t_(t), model_(model), opt_(opt), exchange_(codec, residuals) {}

DpStepStats DataParallel::step(const Batch& local, std::uint64_t k) {
  DpStepStats st;
  const auto logits = model_.forward(local);
  dlogits_.resize(local.size);
  st.loss = bce_with_logits<float>(logits, local.labels, dlogits_);
  model_.backward(dlogits_);
  DenseParams<float>& dense = model_.dense();
  for (std::size_t i = dense.views().size(); i-- > 0;)
    st.w_grad += exchange_.exchange(t_, dense.views()[i].name, dense.grad(i), k);
  for (std::size_t tb = 0; tb < model_.tables().size(); ++tb)
    st.emb_grad += exchange_embedding_grad(t_, model_.sparse_grad(tb), model_.tables()[tb].rows());
  opt_.step();
  return st;
}

}  // namespace sparq
