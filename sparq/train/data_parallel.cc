#include "sparq/train/data_parallel.h"

#include <algorithm>

#include "sparq/coll/patterns.h"
#include "sparq/core/finite.h"
#include "sparq/model/loss.h"
#include "sparq/model/metrics.h"
#include "sparq/train/emb_grad_exchange.h"
#include "sparq/train/verify.h"

namespace sparq {

EmbPlacement parse_emb_placement(std::string_view s) {
  if (s == "replicated") return EmbPlacement::Replicated;
  if (s == "table-wise") return EmbPlacement::TableWise;
  SPARQ_THROW(InputError, "--emb-placement must be replicated or table-wise, got '{}'", s);
}

std::string_view emb_placement_name(EmbPlacement p) {
  return p == EmbPlacement::Replicated ? "replicated" : "table-wise";
}

DataParallel::DataParallel(Transport& t, Dlrm<float>& model, Optimizer<float>& opt, DataParallelOptions opts,
                           compress::ErrorFeedbackStore& residuals)
    : t_(t), model_(model), opt_(opt), opts_(std::move(opts)), exchange_(opts_.codec, residuals) {
  if (opts_.skip_non_finite) opts_.overlap = false;  // skipping decides after backward (data_parallel.h)
  if (t.size() == 1) return;  // nothing to exchange
  if (opts_.placement == EmbPlacement::TableWise)
    table_wise_.emplace(t, model, opts_.emb_fwd, opts_.emb_bwd, opts_.emb_row_len);
  engine_ = std::make_unique<CommEngine>(t, opts_.comm_nice);
  if (opts_.overlap) {
    model_.set_grad_hook([this](std::size_t w, std::size_t b) {
      SPARQ_CHECK(b == w + 1, "layer views {} and {} are not adjacent", w, b);
      view_ready(b);
      view_ready(w);
    });
    if (table_wise_) model_.set_pooled_grad_hook([this] { pooled_grad_ready(); });
    else model_.set_sparse_grad_hook([this] { submit_emb_grad(); });
  }
}

DataParallel::~DataParallel() {
  model_.set_grad_hook(nullptr);
  model_.set_pooled_grad_hook(nullptr);
  model_.set_sparse_grad_hook(nullptr);
  engine_.reset();  // runs (or fails) what is queued before the slots it writes go away
}

void DataParallel::view_ready(std::size_t v) {
  const auto& view = model_.dense().views()[v];
  if (open_.hi == open_.lo) {
    open_ = {view.offset, view.offset + view.size, view.name, {{view.name, view.size}}};
  } else {
    // Views arrive last first: a group grows downwards in the buffer.
    SPARQ_CHECK(view.offset + view.size == open_.lo, "gradient view {} does not precede the group {}", view.name,
                open_.name);
    open_.lo = view.offset;
    open_.name = view.name + "+" + open_.name;
    open_.pieces.insert(open_.pieces.begin(), {view.name, view.size});
  }
  if ((open_.hi - open_.lo) * sizeof(float) >= opts_.fuse_bytes) submit_bucket();
}

void DataParallel::submit_bucket() {
  if (open_.hi == open_.lo) return;
  const std::span<float> g = model_.dense().grads().subspan(open_.lo, open_.hi - open_.lo);
  submit(Entity::WGrad, [this, g, b = std::move(open_), k = k_](Transport& t) {
    return exchange_.exchange(t, b.name, b.pieces, g, k);
  });
  open_ = {};
}

void DataParallel::pooled_grad_ready() {
  // Read in place by the communication thread: the model keeps them until
  // the next step, and step() waits for this exchange before it returns.
  const Dlrm<float>::PooledGrad g = pooled_.empty() ? Dlrm<float>::PooledGrad{} : model_.pooled_grad();
  submit(Entity::EmbBwd, [this, g, k = k_](Transport&) { return table_wise_->backward(g, k); });
}

void DataParallel::submit_emb_grad() {
  submit(Entity::EmbGrad, [this, k = k_](Transport& t) {
    return exchange_embedding_grads(t, embedding_grads(model_), k, opts_.emb_grad_values);
  });
}

ExchangeStats& DataParallel::slot_total(DpStepStats& st, Entity e) {
  switch (e) {
    case Entity::WGrad: return st.w_grad;
    case Entity::EmbGrad: return st.emb_grad;
    case Entity::EmbFwd: return st.emb_fwd;
    case Entity::EmbBwd: return st.emb_bwd;
  }
  SPARQ_THROW(Error, "unknown exchange entity");
}

void DataParallel::submit(Entity e, std::function<ExchangeStats(Transport&)> f) {
  Slot& s = slots_.emplace_back();
  s.entity = e;
  works_.push_back(engine_->submit([&s, f = std::move(f)](Transport& t) {
    const std::optional<double> v0 = t.virtual_time();
    s.stats = f(t);
    if (v0) s.stats.modeled_seconds = *t.virtual_time() - *v0;
    return CollStats{};
  }));
}

BatchPart DataParallel::batch_part(std::size_t size) const {
  const pattern::Partition shares{size, t_.size()};
  BatchPart part{shares.offset(t_.rank()), shares.offset(t_.rank()) + shares.len(t_.rank()),
                 std::vector<bool>(model_.config().num_tables())};
  if (table_wise_)
    for (std::size_t tb = 0; tb < part.tables.size(); ++tb) part.tables[tb] = table_wise_->owners()[tb] == t_.rank();
  return part;
}

DataParallel::Stamp DataParallel::now() const { return {Clock::now(), t_.virtual_time().value_or(0)}; }

DpStepStats DataParallel::step(const Batch& global, std::uint64_t k) {
  SPARQ_CHECK(global.size > 0, "data-parallel step on an empty batch");
  DpStepStats st;
  const int p = t_.size();
  const pattern::Partition shares{global.size, p};
  if (p > 1) slice_batch(global, shares.offset(t_.rank()), shares.len(t_.rank()), local_);
  const Batch& local = p > 1 ? local_ : global;
  k_ = k;
  slots_.clear();
  works_.clear();
  open_ = {};
  const Stamp start = now();
  if (table_wise_) {
    // The owners pool and exchange the lookups on the communication thread
    // while this one runs the bottom MLP; forward() asks for them after it.
    pooled_.resize(local.size * model_.config().num_tables() * model_.config().emb_dim);
    submit(Entity::EmbFwd, [this, &global, k](Transport&) { return table_wise_->forward(global, pooled_, k); });
  }
  const bool computes = local.size > 0;
  double fwd_wait = 0;  // forward blocked on the lookups
  if (computes) {
    fwd_wait = forward_backward(local, global.size, start, st);
  } else {
    // A global batch smaller than the rank count (an epoch's last): this
    // rank contributes zero gradients but still takes part in every exchange.
    model_.zero_grads();
  }
  if (opts_.skip_non_finite && any_rank_non_finite(computes)) {
    for (Work& w : works_) w.wait();  // the lookups' alltoall, if any
    st.skipped = true;
    return st;
  }
  if (p > 1) wait_exchanges(computes, fwd_wait, st);
  const Stamp opt = now();
  opt_.step();
  st.optimizer_s = seconds_since(opt.wall);
  st.modeled.optimizer = now().modeled - opt.modeled;
  return st;
}

double DataParallel::forward_backward(const Batch& local, std::size_t global_size, Stamp start, DpStepStats& st) {
  double fwd_wait = 0;
  const auto logits = table_wise_ ? model_.forward(local,
                                                   [&] {
                                                     const auto w0 = Clock::now();
                                                     works_.front().wait();
                                                     fwd_wait = seconds_since(w0);
                                                     return std::span<const float>(pooled_);
                                                   })
                                  : model_.forward(local);
  st.forward_s = seconds_since(start.wall) - fwd_wait;
  const Stamp bwd = now();
  st.modeled.forward = bwd.modeled - start.modeled;
  dlogits_.resize(local.size);
  st.loss = bce_with_logits<float>(logits, local.labels, dlogits_);
  st.correct = correct_predictions(logits, local.labels);
  // dlogits = (sigmoid - y) / local: rescale to (sigmoid - y) / global * P,
  // so that the exchange's average over P ranks sums to the global mean.
  const int p = t_.size();
  if (p > 1) {
    const float w = static_cast<float>(static_cast<double>(local.size) * p / static_cast<double>(global_size));
    if (w != 1.0f)
      for (float& x : dlogits_) x *= w;
  }
  // With overlap, the hooks start the dense exchanges layer by layer and
  // the lookups' gradients before the bottom MLP's backward.
  model_.backward(dlogits_);
  st.backward_s = seconds_since(bwd.wall);
  st.modeled.backward = now().modeled - bwd.modeled;
  return fwd_wait;
}

bool gradients_hold_non_finite(Dlrm<float>& model, const Dlrm<float>::PooledGrad* lookups) {
  const auto holds = [](std::span<const float> v) { return first_non_finite(v) != v.size(); };
  if (holds(model.dense().grads())) return true;
  if (lookups) {
    const std::size_t width = model.config().num_tables() * model.config().emb_dim;
    for (std::size_t b = 0; b < lookups->rows; ++b)
      if (holds({lookups->data + b * lookups->ld, width})) return true;
    return false;
  }
  for (std::size_t tb = 0; tb < model.tables().size(); ++tb)
    if (holds(model.sparse_grad(tb).values)) return true;
  return false;
}

bool DataParallel::any_rank_non_finite(bool computed) {
  bool here = false;
  if (computed) {
    const Dlrm<float>::PooledGrad pg = table_wise_ ? model_.pooled_grad() : Dlrm<float>::PooledGrad{};
    here = gradients_hold_non_finite(model_, table_wise_ ? &pg : nullptr);
  }
  if (t_.size() == 1) return here;
  float count = here ? 1.0f : 0.0f;
  engine_->submit([&count](Transport& t) { return allreduce(t, std::span<float>(&count, 1), {}); }).wait();
  return count > 0;
}

void DataParallel::wait_exchanges(bool computed, double fwd_wait, DpStepStats& st) {
  if (!opts_.overlap || !computed) {  // the order the hooks give: top layers, tables' gradients, bottom layers
    const std::size_t bottom_views = 2 * model_.config().bot_spec().num_layers();
    for (std::size_t v = model_.dense().views().size(); v-- > bottom_views;) view_ready(v);
    if (table_wise_) pooled_grad_ready();
    else submit_emb_grad();
    for (std::size_t v = bottom_views; v-- > 0;) view_ready(v);
  }
  submit_bucket();
  const double v0 = now().modeled;
  // Wait in submission order; what a wait blocks is that exchange's cost
  // to the training thread (the rest ran behind compute).
  for (std::size_t i = 0; i < works_.size(); ++i) {
    const auto t0 = Clock::now();
    works_[i].wait();
    Slot& s = slots_[i];
    s.stats.wait_seconds = s.entity == Entity::EmbFwd && computed ? fwd_wait : seconds_since(t0);
    slot_total(st, s.entity) += s.stats;
  }
  st.modeled.wait = now().modeled - v0;
}

void DataParallel::gather_model(int root) {
  if (table_wise_) table_wise_->gather(root, opt_);
}

std::uint64_t DataParallel::replica_hash() const {
  std::uint64_t h = hash_bytes(std::as_bytes(std::as_const(model_).dense().params()));
  if (!table_wise_)
    for (const auto& tb : std::as_const(model_).tables()) h = hash_bytes(std::as_bytes(tb.weights()), h);
  return h;
}

namespace {
// Format 1 also held the replicated tables' sparse allreduce plan, which the
// row-sparse allreduce no longer needs: read and dropped.
constexpr std::string_view kDpStateMagic = "sparq data parallel state 2", kDpStateMagic1 = "sparq data parallel state 1";
}  // namespace

std::vector<std::byte> DataParallel::save_state() const {
  BlobWriter w;
  w.str(kDpStateMagic);
  w.bytes(exchange_.save_state());
  return w.take();
}

void DataParallel::load_state(std::span<const std::byte> blob) {
  BlobReader r(blob, "data-parallel state");
  const std::string magic = r.str();
  SPARQ_CHECK_AS(InputError, magic == kDpStateMagic || magic == kDpStateMagic1,
                 "not a data-parallel state (saved by another plan?)");
  exchange_.load_state(r.bytes());
  if (magic == kDpStateMagic1) (void)load_history(r);
  r.expect_end();
}

std::vector<std::byte> DataParallel::repartition_state(std::span<const std::vector<std::byte>> saved,
                                                       std::size_t rank, std::size_t ranks) {
  std::vector<std::vector<std::byte>> exchanges;
  for (const auto& blob : saved) {
    BlobReader r(blob, "data-parallel state");
    SPARQ_CHECK_AS(InputError, r.str() == kDpStateMagic, "not a data-parallel state of this sparq (saved by another plan?)");
    exchanges.push_back(r.bytes());
    r.expect_end();
  }
  BlobWriter w;
  w.str(kDpStateMagic);
  w.bytes(GradExchange::repartition_state(exchanges, rank, ranks));
  return w.take();
}

}  // namespace sparq
