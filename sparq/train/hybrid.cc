#include "sparq/train/hybrid.h"

#include <algorithm>
#include <tuple>

#include "sparq/coll/allreduce.h"
#include "sparq/coll/call.h"
#include "sparq/coll/patterns.h"
#include "sparq/core/blob.h"
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
               MpCodec mp, const DataParallelOptions& dp, compress::ErrorFeedbackStore& residuals)
    : model_(model),
      opt_(opt),
      replica_group_(grid(t, stages, GridAxis::Replica)),
      stage_group_(grid(t, stages, GridAxis::Stage)),
      pipe_(*replica_group_, model, opt, micro_batches, std::move(mp)),
      exchange_(dp.codec, residuals),
      skip_non_finite_(dp.skip_non_finite),
      emb_grad_values_(dp.emb_grad_values) {
  pipe_.zero_non_finite(skip_non_finite_);
  if (dp.placement == EmbPlacement::TableWise && model.stage().middle)
    table_wise_.emplace(*stage_group_, model, dp.emb_fwd, dp.emb_bwd, dp.emb_row_len);
  for (const auto& v : model_.dense().views()) {
    pieces_.push_back({v.name, v.size});
    bucket_name_ += (bucket_name_.empty() ? "" : "+") + v.name;
  }
}

HybridStepStats Hybrid::step(const Batch& global, std::uint64_t k) {
  HybridStepStats st;
  const int d = stage_group_->size(), r = replica();
  const pattern::Partition shares{global.size, d};
  if (d > 1) slice_batch(global, shares.offset(r), shares.len(r), local_);
  const Batch& local = d > 1 ? local_ : global;
  // Weight each replica's mean so that the average over replicas is the
  // global batch's mean (shares may differ by one sample).
  const double weight = static_cast<double>(local.size) * d / static_cast<double>(global.size);
  auto average_over_replicas = [&] {
    if (skip_non_finite_ && any_rank_non_finite()) return false;
    if (d == 1) return true;
    // The backward pass is over: one exchange of the stage's whole gradient
    // buffer costs one collective's latency instead of one per tensor
    // (selection stays per tensor, GradExchange::exchange).
    DenseParams<float>& dense = model_.dense();
    if (!dense.views().empty()) st.w_grad += exchange_.exchange(*stage_group_, bucket_name_, pieces_, dense.grads(), k);
    if (table_wise_) {  // the lookups' gradients to the tables' owners
      st.emb_bwd = table_wise_->backward(pooled_.empty() ? Dlrm<float>::PooledGrad{} : model_.pooled_grad(), k);
      st.emb_bwd.wait_seconds = st.emb_bwd.comm_seconds;
    } else if (!model_.tables().empty()) {
      st.emb_grad += exchange_embedding_grads(*stage_group_, embedding_grads(model_), k, emb_grad_values_);
    }
    return true;
  };
  if (table_wise_) {  // this replica's lookups, from the tables' owners
    pooled_.resize(local.size * model_.config().num_tables() * model_.config().emb_dim);
    st.emb_fwd = table_wise_->forward(global, pooled_, k);
    st.emb_fwd.wait_seconds = st.emb_fwd.comm_seconds;
  }
  const Dlrm<float>::PooledSource lookups = [this] { return std::span<const float>(pooled_); };
  std::vector<std::byte> before;  // the cuts' codec state (topk-grad's residuals)
  if (skip_non_finite_) {
    BlobWriter w;
    pipe_.save_state(w);
    before = w.take();
  }
  st.pipe = pipe_.step(local, k, weight, average_over_replicas, table_wise_ ? &lookups : nullptr);
  if (st.pipe.skipped) {
    BlobReader r(before, "pipeline state");
    pipe_.load_state(r);
    st.skipped = true;
    return st;
  }
  st.loss_sum = st.pipe.loss_sum;
  st.samples = st.pipe.samples;
  return st;
}

bool Hybrid::any_rank_non_finite() {
  // Table-wise, a replica without samples has no lookups' gradients.
  const Dlrm<float>::PooledGrad pg =
      table_wise_ && !pooled_.empty() ? model_.pooled_grad() : Dlrm<float>::PooledGrad{};
  const bool here = pipe_.non_finite_sent() || gradients_hold_non_finite(model_, table_wise_ ? &pg : nullptr);
  // Over the world: along this replica's pipeline, then across the replicas.
  float count = here ? 1.0f : 0.0f;
  allreduce(*replica_group_, std::span<float>(&count, 1), {});
  allreduce(*stage_group_, std::span<float>(&count, 1), {});
  return count > 0;
}

std::vector<float> Hybrid::predict(const Batch& batch) {
  if (replica() != 0) return {};
  return pipe_.predict(batch);
}

void Hybrid::gather_tables() {
  if (table_wise_) table_wise_->gather(0, opt_);
}

void Hybrid::verify(std::uint64_t step) {
  std::uint64_t h = hash_bytes(std::as_bytes(std::as_const(model_).dense().params()));
  if (!table_wise_)
    for (const auto& tb : std::as_const(model_).tables()) h = hash_bytes(std::as_bytes(tb.weights()), h);
  verify_replica_hash(*stage_group_, h, step);
}

namespace {
// The dense views a stage holds, in its store's order: per layer weight, bias.
std::vector<std::string> stage_view_names(const DlrmStage& s) {
  std::vector<std::string> names;
  for (const auto& [prefix, first, last] : {std::tuple{"bot", s.bot_first, s.bot_last}, std::tuple{"top", s.top_first, s.top_last}})
    for (std::size_t l = first; l < last; ++l)
      for (const char* part : {"weight", "bias"}) names.push_back(fmt::format("{}.{}.{}", prefix, l, part));
  return names;
}

// A view's part of a dense optimizer state vector (which spans the buffer).
std::span<float> view_of(std::vector<float>& state, const ParamView& v) {
  return std::span(state).subspan(v.offset, v.size);
}
}  // namespace

// The dense optimizer's state travels view by view with the parameters: a
// stage's buffer holds its views at other offsets than the whole model's.
void gather_whole(Transport& world, const std::vector<DlrmStage>& plan, const Dlrm<float>& stage,
                  Optimizer<float>& stage_opt, Dlrm<float>* whole, Optimizer<float>* whole_opt) {
  const int r = world.rank(), m = static_cast<int>(plan.size());
  if (r >= m) return;  // other replicas hold the same parameters
  Call c(world, "gather stages", tags::kTableGather, Millis{0});
  std::vector<Request> reqs;
  const auto state = stage_opt.table_state();
  const auto dstate = stage_opt.dense_state();
  if (r > 0) {
    const auto& d = stage.dense();
    for (std::size_t v = 0; v < d.views().size(); ++v) {
      reqs.push_back(c.isend(0, d.param(v)));
      for (auto& s : dstate) reqs.push_back(c.isend(0, view_of(s, d.views()[v])));
    }
    for (std::size_t tb = 0; tb < stage.tables().size(); ++tb) {
      reqs.push_back(c.isend(0, stage.tables()[tb].weights()));
      if (!state.empty()) reqs.push_back(c.isend(0, std::span<const float>(state[tb])));
    }
    c.wait_all(reqs);
    return;
  }
  SPARQ_CHECK(whole != nullptr && whole_opt != nullptr, "gather_whole: rank 0 needs the whole model to fill");
  auto& wd = whole->dense();
  const auto wstate = whole_opt->table_state();
  const auto wdstate = whole_opt->dense_state();
  for (int s = 0; s < m; ++s) {
    for (const auto& name : stage_view_names(plan[s])) {
      const std::size_t wv = wd.find(name);
      const auto dst = wd.param(wv);
      if (s == 0) {
        const std::size_t sv = stage.dense().find(name);
        const auto src = stage.dense().param(sv);
        std::copy(src.begin(), src.end(), dst.begin());
        for (std::size_t k = 0; k < dstate.size(); ++k)
          std::ranges::copy(view_of(dstate[k], stage.dense().views()[sv]), view_of(wdstate[k], wd.views()[wv]).begin());
      } else {
        reqs.push_back(c.irecv(s, dst));
        for (auto& ws : wdstate) reqs.push_back(c.irecv(s, view_of(ws, wd.views()[wv])));
      }
    }
    if (!plan[s].middle) continue;
    for (std::size_t tb = 0; tb < whole->tables().size(); ++tb) {
      if (s == 0) {
        const auto src = stage.tables()[tb].weights();
        std::copy(src.begin(), src.end(), whole->tables()[tb].weights().begin());
        if (!state.empty()) wstate[tb] = state[tb];
      } else {
        reqs.push_back(c.irecv(s, whole->tables()[tb].weights()));
        if (!wstate.empty()) reqs.push_back(c.irecv(s, std::span<float>(wstate[tb])));
      }
    }
  }
  c.wait_all(reqs);
}

void copy_stage(const Dlrm<float>& whole, Optimizer<float>& whole_opt, Dlrm<float>& stage, Optimizer<float>& stage_opt) {
  auto& d = stage.dense();
  const auto wdstate = whole_opt.dense_state();
  const auto dstate = stage_opt.dense_state();
  for (std::size_t v = 0; v < d.views().size(); ++v) {
    const std::size_t wv = whole.dense().find(d.views()[v].name);
    const auto src = whole.dense().param(wv);
    std::copy(src.begin(), src.end(), d.param(v).begin());
    for (std::size_t k = 0; k < dstate.size(); ++k)
      std::ranges::copy(view_of(wdstate[k], whole.dense().views()[wv]), view_of(dstate[k], d.views()[v]).begin());
  }
  for (std::size_t tb = 0; tb < stage.tables().size(); ++tb) {
    if (!stage.tables()[tb].held()) continue;  // another replica's table (table-wise)
    const auto src = whole.tables()[tb].weights();
    std::copy(src.begin(), src.end(), stage.tables()[tb].weights().begin());
    if (!stage_opt.table_state().empty()) stage_opt.table_state()[tb] = whole_opt.table_state()[tb];
  }
}

namespace {
// Format 1 also held the replicated tables' sparse allreduce plan, which the
// row-sparse allreduce no longer needs: read and dropped.
constexpr std::string_view kHybridStateMagic = "sparq hybrid state 2", kHybridStateMagic1 = "sparq hybrid state 1";
}  // namespace

std::vector<std::byte> Hybrid::save_state() const {
  BlobWriter w;
  w.str(kHybridStateMagic);
  w.bytes(exchange_.save_state());
  pipe_.save_state(w);
  return w.take();
}

void Hybrid::load_state(std::span<const std::byte> blob) {
  BlobReader r(blob, "hybrid state");
  const std::string magic = r.str();
  SPARQ_CHECK_AS(InputError, magic == kHybridStateMagic || magic == kHybridStateMagic1,
                 "not a model-parallel state (saved by another plan?)");
  exchange_.load_state(r.bytes());
  if (magic == kHybridStateMagic1) (void)load_history(r);
  pipe_.load_state(r);
  r.expect_end();
}

std::vector<std::byte> Hybrid::repartition_state(std::span<const std::vector<std::byte>> saved, std::size_t rank,
                                                 std::size_t ranks, std::size_t stages) {
  SPARQ_CHECK(stages > 0 && ranks % stages == 0 && saved.size() % stages == 0 && rank < ranks &&
                  ranks < saved.size(),
              "Hybrid::repartition_state: rank {} of {} ({} stages) from {} saved", rank, ranks, stages, saved.size());
  std::vector<std::vector<std::byte>> exchanges;  // this stage's, replica by replica
  for (std::size_t s = rank % stages; s < saved.size(); s += stages) {
    BlobReader r(saved[s], "hybrid state");
    SPARQ_CHECK_AS(InputError, r.str() == kHybridStateMagic,
                   "not a model-parallel state of this sparq (saved by another plan?)");
    exchanges.push_back(r.bytes());
    (void)r.u64();  // the cuts' residuals: dropped
  }
  BlobWriter w;
  w.str(kHybridStateMagic);
  w.bytes(GradExchange::repartition_state(exchanges, rank / stages, ranks / stages));
  w.u64(0);  // no residuals at the cuts
  return w.take();
}

}  // namespace sparq
