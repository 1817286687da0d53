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
  s.precision = mlp_precision;
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
  return fmt::format("bot {}, top {}, {} tables x {}", join_dash_list(bot_mlp), join_dash_list(top_spec().dims),
                     num_tables(), emb_dim);
}

std::string join_dash_list(const std::vector<std::size_t>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) s += '-';
    s += std::to_string(v[i]);
  }
  return s;
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

std::vector<DlrmStage> plan_stages(const DlrmConfig& cfg, std::string_view splits) {
  const std::size_t nb = cfg.bot_spec().num_layers(), nt = cfg.top_spec().num_layers();
  std::vector<std::size_t> bot_cuts, top_cuts;
  for (std::size_t pos = 0; !splits.empty() && pos <= splits.size();) {
    const std::size_t end = std::min(splits.find(',', pos), splits.size());
    const std::string_view item = splits.substr(pos, end - pos);
    const std::size_t colon = item.find(':');
    const std::string_view mlp = item.substr(0, colon);
    std::size_t at = 0;
    const char* num = colon == std::string_view::npos ? item.data() + item.size() : item.data() + colon + 1;
    const auto r = std::from_chars(num, item.data() + item.size(), at);
    SPARQ_CHECK_AS(InputError,
                   colon != std::string_view::npos && (mlp == "bot" || mlp == "top") && r.ec == std::errc() &&
                       r.ptr == item.data() + item.size() && num != item.data() + item.size(),
                   "bad --mp-splits item '{}' (expected bot:I or top:J, e.g. bot:2,top:2)", item);
    if (mlp == "bot") {
      SPARQ_CHECK_AS(InputError, at >= 1 && at <= nb, "--mp-splits bot:{}: the bottom MLP has layers 1..{}", at, nb);
      bot_cuts.push_back(at);
    } else {
      SPARQ_CHECK_AS(InputError, at < nt, "--mp-splits top:{}: the top MLP cuts after layer 0..{}", at, nt - 1);
      top_cuts.push_back(at);
    }
    pos = end + 1;
  }
  std::sort(bot_cuts.begin(), bot_cuts.end());
  std::sort(top_cuts.begin(), top_cuts.end());
  SPARQ_CHECK_AS(InputError, std::adjacent_find(bot_cuts.begin(), bot_cuts.end()) == bot_cuts.end() &&
                                 std::adjacent_find(top_cuts.begin(), top_cuts.end()) == top_cuts.end(),
                 "--mp-splits '{}' names a cut twice", splits);
  // Bottom pieces, then the middle (with what is left of the bottom and the
  // top up to its first cut), then the top pieces.
  std::vector<DlrmStage> stages;
  std::size_t b = 0;
  for (std::size_t c : bot_cuts)
    if (c < nb) stages.push_back({b, c, false, 0, 0}), b = c;
  if (!bot_cuts.empty() && bot_cuts.back() == nb) stages.push_back({b, nb, false, 0, 0}), b = nb;
  std::size_t t = top_cuts.empty() ? nt : top_cuts.front();
  stages.push_back({b, nb, true, 0, t});
  for (std::size_t i = 0; i < top_cuts.size(); ++i)
    stages.push_back({nb, nb, false, top_cuts[i], i + 1 < top_cuts.size() ? top_cuts[i + 1] : nt});
  return stages;
}

template <class T>
Dlrm<T>::Dlrm(const DlrmConfig& cfg, std::uint64_t seed, DlrmStage stage, const std::vector<bool>& hold)
    : cfg_(cfg), stage_(stage), dense_(std::make_unique<DenseParams<T>>()), inter_(cfg.num_tables() + 1, cfg.emb_dim) {
  cfg_.validate();
  const std::size_t nb = cfg_.bot_spec().num_layers(), nt = cfg_.top_spec().num_layers();
  if (stage_.bot_last == DlrmStage::kEnd) stage_.bot_last = nb;
  if (stage_.top_last == DlrmStage::kEnd) stage_.top_last = nt;
  const DlrmStage& s = stage_;
  SPARQ_CHECK_AS(InputError, s.bot_first <= s.bot_last && s.bot_last <= nb && s.top_first <= s.top_last && s.top_last <= nt,
                 "stage bot [{}, {}) top [{}, {}) out of range", s.bot_first, s.bot_last, s.top_first, s.top_last);
  SPARQ_CHECK_AS(InputError,
                 s.middle ? s.bot_last == nb && s.top_first == 0
                          : (s.bot_first < s.bot_last) != (s.top_first < s.top_last),
                 "a stage holds the embeddings and interaction with the bottom MLP's end and the top MLP's start, or "
                 "else only bottom or only top layers");
  bot_ = std::make_unique<Mlp<T>>(cfg_.bot_spec(), *dense_, "bot", s.bot_first, s.bot_last);
  top_ = std::make_unique<Mlp<T>>(cfg_.top_spec(), *dense_, "top", s.top_first, s.top_last);
  bot_->init(seed, 0);
  top_->init(seed, 1000);
  if (s.middle) {
    tables_.reserve(cfg_.num_tables());
    SPARQ_CHECK(hold.empty() || hold.size() == cfg_.num_tables(), "{} table flags for {} tables", hold.size(),
                cfg_.num_tables());
    for (std::size_t t = 0; t < cfg_.num_tables(); ++t) {
      // Each table its own stream: a held one is the same either way.
      tables_.emplace_back(cfg_.table_rows[t], cfg_.emb_dim, hold.empty() || hold[t],
                           typename EmbeddingBag<T>::Drawn{seed, 1000000 + t});
    }
  }
  sgrads_.resize(tables_.size());
}

template <class T>
bool Dlrm<T>::whole() const {
  return stage_.bot_first == 0 && stage_.middle && stage_.top_last == cfg_.top_spec().num_layers();
}

template <class T>
std::size_t Dlrm<T>::stage_in_width() const {
  if (stage_.bot_first < stage_.bot_last) return stage_.bot_first == 0 ? 0 : cfg_.bot_mlp[stage_.bot_first];
  return stage_.middle ? cfg_.emb_dim : cfg_.top_spec().dims[stage_.top_first];
}

template <class T>
std::size_t Dlrm<T>::stage_out_width() const {
  if (stage_.top_first < stage_.top_last) return cfg_.top_spec().dims[stage_.top_last];
  return stage_.middle ? cfg_.interaction_width() : cfg_.bot_mlp[stage_.bot_last];
}

template <class T>
std::size_t Dlrm<T>::micro_size(std::size_t mb) const {
  return B_ / M_ + (mb < B_ % M_ ? 1 : 0);
}

namespace {
// First sample of micro-batch mb of B samples in M (sizes differ by at most one).
std::size_t micro_offset(std::size_t B, std::size_t M, std::size_t mb) { return mb * (B / M) + std::min(mb, B % M); }
}  // namespace

template <class T>
void Dlrm<T>::stage_begin(const Batch& batch, std::size_t micro_batches, const PooledSource* pooled) {
  const std::size_t B = batch.size, nd = cfg_.num_dense(), d = cfg_.emb_dim, m = cfg_.num_tables();
  SPARQ_CHECK(micro_batches >= 1, "a step needs at least one micro-batch");
  SPARQ_CHECK(batch.labels.size() >= B, "batch arrays shorter than its size");
  if (first_stage()) {
    SPARQ_CHECK(batch.num_dense == nd, "batch has {} dense features, model expects {}", batch.num_dense, nd);
    SPARQ_CHECK(batch.dense.size() >= B * nd, "batch arrays shorter than its size");
    if constexpr (!std::is_same_v<T, float>) xin_.assign(batch.dense.begin(), batch.dense.begin() + B * nd);
  }
  SPARQ_CHECK(pooled == nullptr || stage_.middle, "lookups given to a stage without the embeddings");
  batch_ = &batch;
  B_ = B;
  M_ = micro_batches;
  mb_done_ = 0;
  micro_.resize(M_);
  external_pooled_ = pooled != nullptr;
  ext_fetched_ = false;
  if (pooled) ext_source_ = *pooled;
  if (!stage_.middle) return;
  if (external_pooled_) {  // the tables' owners compute these, maybe during backward()
    for (auto& g : sgrads_) g.rows.clear(), g.values.clear();
    return;
  }
  SPARQ_CHECK(batch.sparse.size() == m, "batch has {} sparse features, model has {} tables", batch.sparse.size(), m);
  if (M_ == 1) return;  // stage_forward looks up straight into the interaction's input
  pooled_.resize(B * m * d);
  parallel_for(m, 4, [&](std::size_t t0, std::size_t t1) {  // tables are independent
    for (std::size_t t = t0; t < t1; ++t) tables_[t].forward(batch.sparse[t], B, pooled_.data() + t * d, m * d);
  });
}

template <class T>
void Dlrm<T>::zero_grads() {
  std::fill(dense_->grads().begin(), dense_->grads().end(), T(0));
  for (auto& g : sgrads_) g.rows.clear(), g.values.clear();
}

template <class T>
std::span<const T> Dlrm<T>::stage_forward(std::size_t mb, const T* x) {
  SPARQ_CHECK(batch_ != nullptr && mb < M_, "stage_forward({}) outside a step of {} micro-batches", mb, M_);
  const std::size_t o = micro_offset(B_, M_, mb), b = micro_size(mb), d = cfg_.emb_dim, m = cfg_.num_tables();
  Micro& u = micro_[mb];
  const T* h = x;
  if (first_stage()) {
    if constexpr (std::is_same_v<T, float>)
      h = batch_->dense.data() + o * cfg_.num_dense();
    else
      h = xin_.data() + o * cfg_.num_dense();
  }
  SPARQ_CHECK(h != nullptr || b == 0, "stage_forward: this stage needs the previous stage's activation");
  h = bot_->forward(h, b, u.bot);  // [b x d] on the middle stage
  if (stage_.middle) {
    const std::size_t ld = (m + 1) * d;
    u.v.resize(b * ld);
    for (std::size_t i = 0; i < b; ++i) std::copy_n(h + i * d, d, u.v.data() + i * ld);
    if (external_pooled_ || M_ > 1) {
      const T* src = pooled_.data();
      if (external_pooled_) {
        if (!ext_fetched_) {
          ext_pooled_ = ext_source_();
          ext_fetched_ = true;
          SPARQ_CHECK(ext_pooled_.size() == B_ * m * d, "{} pooled values for {} samples x {} tables x {}",
                      ext_pooled_.size(), B_, m, d);
        }
        src = ext_pooled_.data();
      }
      for (std::size_t i = 0; i < b; ++i) std::copy_n(src + (o + i) * m * d, m * d, u.v.data() + i * ld + d);
    } else {
      parallel_for(m, 4, [&](std::size_t t0, std::size_t t1) {  // tables are independent
        for (std::size_t t = t0; t < t1; ++t) tables_[t].forward(batch_->sparse[t], b, u.v.data() + (t + 1) * d, ld);
      });
    }
    u.r.resize(b * inter_.out_width());
    inter_.forward(u.v.data(), b, u.r.data());
    h = u.r.data();
  }
  h = top_->forward(h, b, u.top);
  return {h, b * stage_out_width()};
}

template <class T>
const T* Dlrm<T>::stage_backward(std::size_t mb, const T* dy) {
  SPARQ_CHECK(batch_ != nullptr && mb < M_ && mb_done_ < M_, "stage_backward({}) outside a step of {} micro-batches",
              mb, M_);
  const std::size_t o = micro_offset(B_, M_, mb), b = micro_size(mb), d = cfg_.emb_dim, m = cfg_.num_tables();
  const bool accumulate = mb_done_ > 0, notify = mb_done_ + 1 == M_;
  ++mb_done_;
  Micro& u = micro_[mb];
  const T* g = top_->backward(dy, true, u.top, accumulate, notify);
  if (stage_.middle) {
    const std::size_t ld = (m + 1) * d;
    u.dv.resize(b * ld);
    inter_.backward(u.v.data(), g, b, u.dv.data());
    if (M_ > 1) {  // gather the micro-batches' gradients
      dpooled_.resize(B_ * m * d);
      for (std::size_t i = 0; i < b; ++i) std::copy_n(u.dv.data() + i * ld + d, m * d, dpooled_.data() + (o + i) * m * d);
    }
    if (external_pooled_ && notify && pooled_grad_hook_) pooled_grad_hook_();
    if (notify && !external_pooled_) {  // every micro-batch's lookups' gradients are in
      tables_backward();
      if (sparse_grad_hook_) sparse_grad_hook_();
    }
    u.dx.resize(b * d);
    for (std::size_t i = 0; i < b; ++i) std::copy_n(u.dv.data() + i * ld, d, u.dx.data() + i * d);
    g = u.dx.data();
  }
  const bool want_dx = !first_stage() || want_input_grad_;
  g = bot_->backward(g, want_dx, u.bot, accumulate, notify);
  if (!first_stage()) return g;
  if (want_input_grad_) input_grad_.assign(g, g + b * cfg_.num_dense());
  return nullptr;
}

template <class T>
void Dlrm<T>::tables_backward() {
  const std::size_t d = cfg_.emb_dim, m = cfg_.num_tables();
  const bool direct = M_ == 1;  // gradients still in the interaction's layout
  const T* src = direct ? micro_[0].dv.data() + d : dpooled_.data();
  const std::size_t ld = direct ? (m + 1) * d : m * d;
  parallel_for(m, 4, [&](std::size_t t0, std::size_t t1) {  // tables are independent
    for (std::size_t t = t0; t < t1; ++t) tables_[t].backward(batch_->sparse[t], B_, src + t * d, ld, sgrads_[t]);
  });
}

template <class T>
void Dlrm<T>::stage_end() {
  SPARQ_CHECK(mb_done_ == M_, "stage_end() after {} of {} micro-batch backwards", mb_done_, M_);
}

template <class T>
std::span<const T> Dlrm<T>::forward(const Batch& batch) {
  SPARQ_CHECK(whole(), "forward(batch) on a model-parallel stage: use stage_forward");
  stage_begin(batch, 1);
  return stage_forward(0, nullptr);
}

template <class T>
std::span<const T> Dlrm<T>::forward(const Batch& batch, std::span<const T> pooled) {
  return forward(batch, [pooled] { return pooled; });
}

template <class T>
std::span<const T> Dlrm<T>::forward(const Batch& batch, const PooledSource& pooled) {
  SPARQ_CHECK(whole(), "forward(batch, pooled) on a model-parallel stage");
  stage_begin(batch, 1, &pooled);
  return stage_forward(0, nullptr);
}

template <class T>
void Dlrm<T>::backward(std::span<const T> dlogits) {
  SPARQ_CHECK(batch_ != nullptr && dlogits.size() == B_ && M_ == 1,
              "backward() of {} logits after a forward() of {}", dlogits.size(), B_);
  stage_backward(0, dlogits.data());
  stage_end();
}

template <class T>
typename Dlrm<T>::PooledGrad Dlrm<T>::pooled_grad() const {
  SPARQ_CHECK(external_pooled_ && batch_ != nullptr && mb_done_ == M_,
              "pooled_grad() without a finished backward() of a forward() with external lookups");
  const std::size_t d = cfg_.emb_dim, m = cfg_.num_tables();
  if (M_ > 1) return {dpooled_.data(), B_, m * d};
  return {micro_[0].dv.data() + d, B_, (m + 1) * d};  // the tables' part of the interaction's gradient
}

template class Dlrm<float>;
template class Dlrm<double>;

}  // namespace sparq
