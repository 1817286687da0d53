#include "sparq/model/dlrm.h"

#include <algorithm>
#include <charconv>

#include "sparq/core/error.h"
#include "sparq/model/parallel.h"

namespace sparq {

MlpSpec DlrmConfig::top_spec() const {
  MlpSpec s;
  s.dims.push_back(interaction_width());
  s.dims.insert(s.dims.end(), top_mlp.begin(), top_mlp.end());
  s.relu_last = false;  // the last layer yields the logit
  return s;
}

void DlrmConfig::validate() const {
  SPARQ_CHECK_AS(InputError, bot_mlp.size() >= 2, "bottom MLP needs at least an input and an output width");
  SPARQ_CHECK_AS(InputError, !top_mlp.empty() && top_mlp.back() == 1,
                 "top MLP must end in width 1 (the logit), got {}", top_mlp.empty() ? 0 : top_mlp.back());
  SPARQ_CHECK_AS(InputError, bot_mlp.back() == emb_dim,
                 "bottom MLP output width {} must equal the embedding dimension {}", bot_mlp.back(), emb_dim);
  SPARQ_CHECK_AS(InputError, emb_dim > 0, "embedding dimension must be positive");
  for (auto w : bot_mlp) SPARQ_CHECK_AS(InputError, w > 0, "bottom MLP width 0");
  for (auto w : top_mlp) SPARQ_CHECK_AS(InputError, w > 0, "top MLP width 0");
  for (auto r : table_rows) SPARQ_CHECK_AS(InputError, r > 0 && r <= (std::size_t{1} << 32), "table rows {} out of range", r);
}

std::string DlrmConfig::describe() const {
  auto join = [](const std::vector<std::size_t>& v) {
    std::string s;
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "-" : "") + std::to_string(v[i]);
    return s;
  };
  return fmt::format("bot {}, top {}, {} tables x {}", join(bot_mlp), join(top_spec().dims), num_tables(), emb_dim);
}

std::vector<std::size_t> parse_dash_list(const std::string& s) {
  std::vector<std::size_t> out;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    const std::size_t end = std::min(s.find('-', pos), s.size());
    std::size_t v = 0;
    const auto r = std::from_chars(s.data() + pos, s.data() + end, v);
    SPARQ_CHECK_AS(InputError, r.ec == std::errc() && r.ptr == s.data() + end && end > pos,
                   "bad dash list '{}' (expected e.g. 13-512-256)", s);
    out.push_back(v);
    pos = end + 1;
  }
  return out;
}

template <class T>
Dlrm<T>::Dlrm(const DlrmConfig& cfg, std::uint64_t seed)
    : cfg_(cfg), dense_(std::make_unique<DenseParams<T>>()), inter_(cfg.num_tables() + 1, cfg.emb_dim) {
  cfg_.validate();
  bot_ = std::make_unique<Mlp<T>>(cfg_.bot_spec(), *dense_, "bot");
  top_ = std::make_unique<Mlp<T>>(cfg_.top_spec(), *dense_, "top");
  bot_->init(seed, 0);
  top_->init(seed, 1000);
  tables_.reserve(cfg_.num_tables());
  for (std::size_t t = 0; t < cfg_.num_tables(); ++t) {
    tables_.emplace_back(cfg_.table_rows[t], cfg_.emb_dim);
    tables_.back().init(seed, 1000000 + t);
  }
  sgrads_.resize(cfg_.num_tables());
}

template <class T>
std::span<const T> Dlrm<T>::forward(const Batch& batch) {
  return forward(batch, {});
}

template <class T>
std::span<const T> Dlrm<T>::forward(const Batch& batch, std::span<const T> pooled) {
  const std::size_t B = batch.size, nd = cfg_.num_dense(), d = cfg_.emb_dim, m = cfg_.num_tables();
  external_pooled_ = !pooled.empty();
  SPARQ_CHECK(batch.num_dense == nd, "batch has {} dense features, model expects {}", batch.num_dense, nd);
  if (external_pooled_)
    SPARQ_CHECK(pooled.size() == B * m * d, "{} pooled values for {} samples x {} tables x {}", pooled.size(), B, m, d);
  else
    SPARQ_CHECK(batch.sparse.size() == m, "batch has {} sparse features, model has {} tables", batch.sparse.size(), m);
  SPARQ_CHECK(batch.dense.size() >= B * nd && batch.labels.size() >= B, "batch arrays shorter than its size");
  batch_ = &batch;
  B_ = B;
  const T* x;
  if constexpr (std::is_same_v<T, float>) {
    x = batch.dense.data();
  } else {
    xin_.assign(batch.dense.begin(), batch.dense.begin() + B * nd);
    x = xin_.data();
  }
  const T* bot_out = bot_->forward(x, B);  // [B x d]
  const std::size_t ld = (m + 1) * d;
  v_.resize(B * ld);
  for (std::size_t b = 0; b < B; ++b) std::copy(bot_out + b * d, bot_out + (b + 1) * d, v_.data() + b * ld);
  if (external_pooled_) {
    for (std::size_t b = 0; b < B; ++b)
      std::copy_n(pooled.data() + b * m * d, m * d, v_.data() + b * ld + d);
  } else {
    parallel_for(m, 4, [&](std::size_t t0, std::size_t t1) {  // tables are independent
      for (std::size_t t = t0; t < t1; ++t) tables_[t].forward(batch.sparse[t], B, v_.data() + (t + 1) * d, ld);
    });
  }
  r_.resize(B * inter_.out_width());
  inter_.forward(v_.data(), B, r_.data());
  const T* logits = top_->forward(r_.data(), B);  // [B x 1]
  logits_ = std::span<const T>(logits, B);
  return logits_;
}

template <class T>
void Dlrm<T>::backward(std::span<const T> dlogits) {
  SPARQ_CHECK(batch_ != nullptr && dlogits.size() == B_, "backward() of {} logits after a forward() of {}",
              dlogits.size(), B_);
  const std::size_t B = B_, d = cfg_.emb_dim, m = cfg_.num_tables(), ld = (m + 1) * d;
  const T* dr = top_->backward(dlogits.data(), true);  // [B x interaction width]
  dv_.resize(B * ld);
  inter_.backward(v_.data(), dr, B, dv_.data());
  if (external_pooled_) {
    for (auto& g : sgrads_) g.rows.clear(), g.values.clear();  // the tables' owners compute these
  } else {
    parallel_for(m, 4, [&](std::size_t t0, std::size_t t1) {  // tables are independent
      for (std::size_t t = t0; t < t1; ++t)
        tables_[t].backward(batch_->sparse[t], B, dv_.data() + (t + 1) * d, ld, sgrads_[t]);
    });
  }
  dx_.resize(B * d);
  for (std::size_t b = 0; b < B; ++b) std::copy(dv_.data() + b * ld, dv_.data() + b * ld + d, dx_.data() + b * d);
  const T* din = bot_->backward(dx_.data(), want_input_grad_);
  if (want_input_grad_) input_grad_.assign(din, din + B * cfg_.num_dense());
}

template <class T>
void Dlrm<T>::pooled_grad(std::span<T> out) const {
  const std::size_t B = B_, d = cfg_.emb_dim, m = cfg_.num_tables(), ld = (m + 1) * d;
  SPARQ_CHECK(out.size() == B * m * d && dv_.size() == B * ld, "pooled_grad(): {} values for {} samples x {} x {}",
              out.size(), B, m, d);
  for (std::size_t b = 0; b < B; ++b) std::copy_n(dv_.data() + b * ld + d, m * d, out.data() + b * m * d);
}

template class Dlrm<float>;
template class Dlrm<double>;

}  // namespace sparq
