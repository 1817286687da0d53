#include "sparq/train/hybrid.h"

#include "sparq/coll/patterns.h"
#include "sparq/train/emb_grad_exchange.h"
#include "sparq/train/verify.h"

namespace sparq {

namespace {
std::unique_ptr<GroupTransport> grid(Transport& t, std::size_t stages, GridAxis axis) {
  const int m = static_cast<int>(stages);
  SPARQ_CHECK_AS(InputError, m >= 1 && t.size() % m == 0, "{} ranks do not split into replicas of {} stages", t.size(),
                 m);
  return std::make_unique<GroupTransport>(t, grid_group(t.size(), t.size() / m, m, t.rank(), axis));
}
}  // namespace

Hybrid::Hybrid(Transport& t, std::size_t stages, Dlrm<float>& model, Optimizer<float>& opt, std::size_t micro_batches,
               MpCodec mp, DpCodec dp, compress::ErrorFeedbackStore& residuals)
    : model_(model),
      replica_group_(grid(t, stages, GridAxis::Replica)),
      stage_group_(grid(t, stages, GridAxis::Stage)),
      pipe_(*replica_group_, model, opt, micro_batches, std::move(mp)),
      exchange_(std::move(dp), residuals) {}

HybridStepStats Hybrid::step(const Batch& global, std::uint64_t k) {
  HybridStepStats st;
  const int d = stage_group_->size(), r = replica();
  const pattern::Partition shares{global.size, d};
  if (d > 1) slice_batch(global, shares.offset(r), shares.len(r), local_);
  const Batch& local = d > 1 ? local_ : global;
  SPARQ_CHECK_AS(InputError, local.size > 0, "a global batch of {} samples leaves replica {} of {} without a sample",
                 global.size, r, d);
  // Weight each replica's mean so that the average over replicas is the
  // global batch's mean (shares may differ by one sample).
  const double weight = static_cast<double>(local.size) * d / static_cast<double>(global.size);
  auto average_over_replicas = [&] {
    if (d == 1) return;
    DenseParams<float>& dense = model_.dense();
    for (std::size_t i = dense.views().size(); i-- > 0;)
      st.w_grad += exchange_.exchange(*stage_group_, dense.views()[i].name, dense.grad(i), k);
    for (std::size_t tb = 0; tb < model_.tables().size(); ++tb)
      st.emb_grad += exchange_embedding_grad(*stage_group_, model_.sparse_grad(tb), model_.tables()[tb].rows(),
                                            model_.tables()[tb].dim());
  };
  st.pipe = pipe_.step(local, weight, average_over_replicas);
  st.loss_sum = st.pipe.loss_sum;
  st.samples = st.pipe.samples;
  return st;
}

std::vector<float> Hybrid::predict(const Batch& batch) {
  if (replica() != 0) return {};
  return pipe_.predict(batch);
}

void Hybrid::verify(std::uint64_t step) {
  std::uint64_t h = hash_bytes(std::as_bytes(std::as_const(model_).dense().params()));
  for (const auto& tb : std::as_const(model_).tables()) h = hash_bytes(std::as_bytes(tb.weights()), h);
  verify_replica_hash(*stage_group_, h, step);
}

}  // namespace sparq
