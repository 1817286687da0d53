#pragma once
// One data-parallel training step with replicated embedding tables: every
// rank runs forward and backward on its share of the global batch, the dense
// gradients are exchanged tensor by tensor with the --dp-codec (last layer
// first, the order backward produces them), each table's row-sparse gradient
// with the sparse allreduce, and every rank applies the same update.
//
// With equal shares and codec `none`, P ranks compute the gradient of the
// global batch's mean loss, so training equals single-rank training at the
// global batch size up to float summation order (tests/train).
#include "sparq/data/batch.h"
#include "sparq/model/dlrm.h"
#include "sparq/model/optimizer.h"
#include "sparq/train/grad_exchange.h"

namespace sparq {

struct DpStepStats {
  double loss = 0;          // this rank's mean loss on its share
  ExchangeStats w_grad;     // dense gradients
  ExchangeStats emb_grad;   // replicated embedding gradients
  double forward_s = 0, backward_s = 0, optimizer_s = 0;  // exchanges are in w_grad / emb_grad
};

class DataParallel {
 public:
  // All references must outlive this object; `residuals` holds the codec's
  // error-feedback state.
  DataParallel(Transport& t, Dlrm<float>& model, Optimizer<float>& opt, const DpCodec& codec,
               compress::ErrorFeedbackStore& residuals);

  // Step k on this rank's share `local` of a global batch of `global_size`
  // samples (shares may differ by one sample: each rank's loss gradient is
  // weighted so that the average over ranks is the global batch's mean).
  // On one rank nothing is exchanged.
  DpStepStats step(const Batch& local, std::size_t global_size, std::uint64_t k);

 private:
  Transport& t_;
  Dlrm<float>& model_;
  Optimizer<float>& opt_;
  GradExchange exchange_;
  std::vector<float> dlogits_;
};

}  // namespace sparq
