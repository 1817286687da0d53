#include "sparq/train/pipeline.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "sparq/coll/call.h"
#include "sparq/compress/topk.h"
#include "sparq/core/finite.h"
#include "sparq/core/kernel_costs.h"
#include "sparq/core/rng.h"
#include "sparq/model/blas.h"
#include "sparq/model/loss.h"
#include "sparq/model/metrics.h"

namespace sparq {

namespace {

// dct's options after its ETA: "l1=LAMBDA", "grad=dense".
void parse_dct_option(std::string_view s, std::string_view opt, MpCodec& c) {
  if (opt == "grad=dense") {
    c.dense_grad = true;
    return;
  }
  const auto r = opt.starts_with("l1=") ? std::from_chars(opt.data() + 3, opt.data() + opt.size(), c.drop_l1)
                                        : std::from_chars_result{opt.data(), std::errc::invalid_argument};
  SPARQ_CHECK_AS(InputError,
                 r.ec == std::errc() && r.ptr == opt.data() + opt.size() && std::isfinite(c.drop_l1) && c.drop_l1 >= 0,
                 "bad --mp-codec '{}': '{}' is not l1=LAMBDA (LAMBDA >= 0) or grad=dense", s, opt);
}

// DCT-MP's masking and packing of `n` values in rows of `cols`, charged on
// the virtual clock by its count of values (kernel_costs.h), as the other
// codecs are (sparq/coll/codec.cc). Each charge ends before the transport's
// next call, which is where the clock reads a rank's CPU time.
ChargedKernel charged_dct_mp(const char* op, std::size_t n, std::size_t cols, const MpCodec& c) {
  return ChargedKernel(op, Units{n}, cols, static_cast<std::size_t>(std::lround(c.eta * 1e6)),
                       static_cast<std::size_t>(c.values));
}

}  // namespace

MpCodec parse_mp_codec(std::string_view s) {
  MpCodec c;
  c.text = std::string(s);
  if (s == "none") return c;
  for (const auto& [prefix, kind] : {std::pair{"dct:", MpCodec::Kind::Dct}, std::pair{"topk-grad:", MpCodec::Kind::TopkGrad},
                                     std::pair{"sketch:", MpCodec::Kind::Sketch}}) {
    const std::string_view pre(prefix);
    if (!s.starts_with(pre)) continue;
    auto body = s.substr(pre.size());
    const auto comma = body.find(',');
    for (auto opts = body.substr(std::min(comma, body.size())); !opts.empty();) {
      SPARQ_CHECK_AS(InputError, kind == MpCodec::Kind::Dct, "bad --mp-codec '{}': only dct takes options", s);
      opts.remove_prefix(1);
      const auto next = std::min(opts.find(','), opts.size());
      parse_dct_option(s, opts.substr(0, next), c);
      opts.remove_prefix(next);
    }
    body = body.substr(0, comma);
    if (kind == MpCodec::Kind::Dct && body.ends_with("+bf16")) {
      c.values = compress::ValueFormat::Bf16;
      body.remove_suffix(5);
    }
    const auto r = std::from_chars(body.data(), body.data() + body.size(), c.eta);
    SPARQ_CHECK_AS(InputError, r.ec == std::errc() && r.ptr == body.data() + body.size() && c.eta >= 0 && c.eta < 1,
                   "bad --mp-codec '{}': expected {}ETA with 0 <= ETA < 1", s, pre);
    c.kind = kind;
    return c;
  }
  SPARQ_THROW(InputError, "unknown --mp-codec '{}' (none, dct:ETA[+bf16][,l1=LAMBDA][,grad=dense], topk-grad:ETA, sketch:ETA)", s);
}

Pipeline::Pipeline(Transport& t, Dlrm<float>& stage, Optimizer<float>& opt, std::size_t micro_batches, MpCodec codec)
    : t_(t), model_(stage), opt_(opt), micro_(micro_batches), codec_(std::move(codec)), stage_(t.rank()),
      stages_(t.size()) {
  SPARQ_CHECK_AS(InputError, micro_ >= 1, "--micro-batches must be >= 1");
  SPARQ_CHECK(stage_ + 1 == stages_ ? stage.stage_out_width() == 1 : true,
              "the last stage must end in the logit, not a width {}", stage.stage_out_width());
}

template <class What>
std::span<const float> Pipeline::finite(std::span<const float> v, What&& what) {
  if (!zero_non_finite_ || !in_step_) {
    SPARQ_CHECK_FINITE(v, what);
    return v;
  }
  if (first_non_finite(v) == v.size()) return v;
  non_finite_sent_ = true;
  auto& copy = zeroed_.emplace_back(v.begin(), v.end());
  for (float& x : copy)
    if (!std::isfinite(x)) x = 0.0f;
  return copy;
}

void Pipeline::send_act(std::size_t mb, std::span<const float> y_in, std::size_t cols, PipelineStepStats& st) {
  const std::span<const float> y = finite(y_in, [&] {
    return fmt::format("{}, stage {}, micro-batch {}: the activation matrix for stage {} (X_act)", at_, stage_, mb,
                       stage_ + 1);
  });
  const std::size_t rows = cols ? y.size() / cols : 0;
  if (threshold_eta_ >= 0)
    for (std::size_t r = 0; r < rows; ++r) {
      st.threshold_sum += compress::sparsity_threshold(y.subspan(r * cols, cols), threshold_eta_, row_scratch_);
      ++st.threshold_rows;
    }
  const auto before = t_.counters().total().bytes_sent;
  const auto t0 = Clock::now();
  ExchangeStats& x = st.x_act;
  if (codec_.kind == MpCodec::Kind::None || codec_.kind == MpCodec::Kind::TopkGrad) {
    sends_.push_back(t_.isend(stage_ + 1, tags::kPipelineAct, std::as_bytes(y)));
    x.kept += y.size();
  } else if (codec_.kind == MpCodec::Kind::Sketch) {
    const auto& sk = sketch_matrix(mb, cols);
    const std::size_t r = sk.size() / cols;
    auto& buf = send_bufs_.emplace_back(rows * r * sizeof(float));
    float* out = reinterpret_cast<float*>(buf.data());
    gemm<float>(false, false, rows, r, cols, 1.0f, y.data(), cols, sk.data(), r, 0.0f, out, r);  // Y = X S
    x.compress_seconds += seconds_since(t0);
    sends_.push_back(t_.isend(stage_ + 1, tags::kPipelineAct, buf));
    x.kept += rows * r;
  } else {
    {  // the charge ends before the send: the clock's next event
      const ChargedKernel charged = charged_dct_mp("dct_mp_encode_per_value", y.size(), cols, codec_);
      out_masks_[mb] = compress::dct_mp_select(y, cols, codec_.eta);
      scratch_.resize(rows * out_masks_[mb].keep());
      compress::dct_mp_gather(out_masks_[mb], y, scratch_);
      send_bufs_.emplace_back(compress::dct_mp_message_bytes(rows, cols, out_masks_[mb].keep(), codec_.values));
      compress::dct_mp_encode(out_masks_[mb], scratch_, send_bufs_.back(), codec_.values);
    }
    x.compress_seconds += seconds_since(t0);
    sends_.push_back(t_.isend(stage_ + 1, tags::kPipelineAct, send_bufs_.back()));
    x.kept += rows * out_masks_[mb].keep();
  }
  x.comm_seconds += seconds_since(t0);
  x.bytes_sent += t_.counters().total().bytes_sent - before;
  x.dense_bytes += y.size() * sizeof(float);
  x.values += y.size();
}

std::span<const float> Pipeline::recv_act(std::size_t mb, std::size_t rows, std::size_t cols, PipelineStepStats& st) {
  auto& dense = in_acts_[mb];
  dense.resize(rows * cols);
  const auto t0 = Clock::now();
  if (codec_.kind == MpCodec::Kind::None || codec_.kind == MpCodec::Kind::TopkGrad) {
    t_.recv(stage_ - 1, tags::kPipelineAct, std::as_writable_bytes(std::span<float>(dense)));
    st.idle_s += seconds_since(t0);
  } else if (codec_.kind == MpCodec::Kind::Sketch) {
    const auto& sk = sketch_matrix(mb, cols);
    const std::size_t r = sk.size() / cols;
    scratch_.resize(rows * r);
    t_.recv(stage_ - 1, tags::kPipelineAct, std::as_writable_bytes(std::span<float>(scratch_)));
    st.idle_s += seconds_since(t0);
    gemm<float>(false, true, rows, cols, r, 1.0f, scratch_.data(), r, sk.data(), r, 0.0f, dense.data(), cols);  // Y S^T
  } else {
    const std::size_t keep = compress::kept_count(cols, codec_.eta);
    recv_buf_.resize(compress::dct_mp_message_bytes(rows, cols, keep, codec_.values));
    t_.recv(stage_ - 1, tags::kPipelineAct, recv_buf_);
    st.idle_s += seconds_since(t0);
    const ChargedKernel charged = charged_dct_mp("dct_mp_decode_per_value", dense.size(), cols, codec_);
    scratch_.resize(rows * keep);
    compress::dct_mp_decode(recv_buf_, rows, cols, keep, in_masks_[mb], scratch_, codec_.values);
    compress::dct_mp_scatter(in_masks_[mb], scratch_, dense);
  }
  return dense;
}

void Pipeline::send_grad(std::size_t mb, std::span<const float> dx_in, PipelineStepStats& st) {
  const std::span<const float> dx = finite(dx_in, [&] {
    return fmt::format("{}, stage {}, micro-batch {}: the gradient matrix for stage {} (X_grad)", at_, stage_, mb,
                       stage_ - 1);
  });
  const auto before = t_.counters().total().bytes_sent;
  const auto t0 = Clock::now();
  ExchangeStats& x = st.x_grad;
  if (grad_crosses_dense()) {
    sends_.push_back(t_.isend(stage_ - 1, tags::kPipelineGrad, std::as_bytes(dx)));
    x.kept += dx.size();
  } else if (codec_.kind == MpCodec::Kind::TopkGrad) {
    // Error feedback per micro-batch slot: g = dx + residual; send the top of
    // each row, keep the rest (a slot's shape only changes with the batch size).
    const std::size_t cols = model_.stage_in_width(), rows = cols ? dx.size() / cols : 0;
    grad_residual_.resize(micro_);
    auto& e = grad_residual_[mb];
    if (e.size() != dx.size()) e.assign(dx.size(), 0.0f);
    for (std::size_t i = 0; i < dx.size(); ++i) e[i] += dx[i];
    const compress::RowMask mask = compress::dct_mp_select(e, cols, codec_.eta);
    scratch_.resize(rows * mask.keep());
    compress::dct_mp_gather(mask, e, scratch_);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < cols; ++c)
        if (mask.test(r, c)) e[r * cols + c] = 0.0f;
    auto& buf = send_bufs_.emplace_back(compress::dct_mp_message_bytes(rows, cols, mask.keep()));
    compress::dct_mp_encode(mask, scratch_, buf);
    x.compress_seconds += seconds_since(t0);
    sends_.push_back(t_.isend(stage_ - 1, tags::kPipelineGrad, buf));
    x.kept += rows * mask.keep();
  } else {
    const compress::RowMask& mask = in_masks_[mb];  // the mask the activation came with
    {
      const ChargedKernel charged = charged_dct_mp("dct_mp_grad_encode_per_value", dx.size(), mask.cols(), codec_);
      scratch_.resize(mask.rows() * mask.keep());
      compress::dct_mp_gather(mask, dx, scratch_);
      send_bufs_.emplace_back(compress::values_bytes(scratch_.size(), codec_.values));
      compress::dct_mp_encode_values(scratch_, send_bufs_.back(), codec_.values);
    }
    x.compress_seconds += seconds_since(t0);
    sends_.push_back(t_.isend(stage_ - 1, tags::kPipelineGrad, send_bufs_.back()));
    x.kept += scratch_.size();
  }
  x.comm_seconds += seconds_since(t0);
  x.bytes_sent += t_.counters().total().bytes_sent - before;
  x.dense_bytes += dx.size() * sizeof(float);
  x.values += dx.size();
}

std::span<const float> Pipeline::recv_grad(std::size_t mb, std::size_t rows, std::size_t cols,
                                           PipelineStepStats& st) {
  auto& dense = in_grads_[mb];
  dense.resize(rows * cols);
  const auto t0 = Clock::now();
  if (grad_crosses_dense()) {
    t_.recv(stage_ + 1, tags::kPipelineGrad, std::as_writable_bytes(std::span<float>(dense)));
    st.idle_s += seconds_since(t0);
  } else if (codec_.kind == MpCodec::Kind::TopkGrad) {
    const std::size_t keep = compress::kept_count(cols, codec_.eta);
    recv_buf_.resize(compress::dct_mp_message_bytes(rows, cols, keep));
    t_.recv(stage_ + 1, tags::kPipelineGrad, recv_buf_);
    st.idle_s += seconds_since(t0);
    compress::RowMask mask;
    scratch_.resize(rows * keep);
    compress::dct_mp_decode(recv_buf_, rows, cols, keep, mask, scratch_);
    compress::dct_mp_scatter(mask, scratch_, dense);
  } else {
    const compress::RowMask& mask = out_masks_[mb];  // the mask this stage sent the activation with
    scratch_.resize(mask.rows() * mask.keep());
    recv_buf_.resize(compress::values_bytes(scratch_.size(), codec_.values));
    t_.recv(stage_ + 1, tags::kPipelineGrad, recv_buf_);
    st.idle_s += seconds_since(t0);
    compress::dct_mp_decode_values(recv_buf_, scratch_, codec_.values);
    compress::dct_mp_scatter(mask, scratch_, dense);
  }
  // The drop penalty's gradient, lambda per sample of the mean loss: every
  // cut follows a ReLU, so d|y|/dy = 1 where y > 0, and the stage's ReLU
  // backward zeroes the rest.
  if (codec_.kind == MpCodec::Kind::Dct && codec_.drop_l1 > 0) {
    const compress::RowMask& mask = out_masks_[mb];
    const float g = static_cast<float>(codec_.drop_l1) * loss_scale_;
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < cols; ++c)
        if (!mask.test(r, c)) dense[r * cols + c] += g;
  }
  return dense;
}

const std::vector<float>& Pipeline::sketch_matrix(std::size_t mb, std::size_t cols) {
  const std::size_t r = compress::kept_count(cols, codec_.eta);
  Rng rng(step_ * 1000003 + mb, 0x5e7c4);  // the same on both sides of a cut
  sketch_.resize(cols * r);
  const double sd = 1.0 / std::sqrt(static_cast<double>(r));
  for (float& v : sketch_) v = static_cast<float>(rng.normal(0.0, sd));
  return sketch_;
}

void Pipeline::wait_sends() {
  wait_all(sends_, t_.timeout());
  sends_.clear();
  send_bufs_.clear();
  zeroed_.clear();
}

void Pipeline::forward_all(const Batch& batch, std::size_t micro, double weight, PipelineStepStats& st,
                           std::vector<float>* logits, const Dlrm<float>::PooledSource* pooled) {
  const bool last = stage_ + 1 == stages_;
  const std::size_t in_w = model_.stage_in_width(), out_w = model_.stage_out_width();
  for (auto* v : {&in_acts_, &in_grads_, &dlogits_}) v->resize(micro);
  out_masks_.resize(micro);
  in_masks_.resize(micro);
  auto t0 = Clock::now();
  model_.stage_begin(batch, micro, pooled);
  st.forward_s += seconds_since(t0);
  for (std::size_t mb = 0; mb < micro; ++mb) {
    const std::size_t rows = model_.micro_size(mb);
    const float* x = stage_ > 0 ? recv_act(mb, rows, in_w, st).data() : nullptr;
    t0 = Clock::now();
    const auto y = model_.stage_forward(mb, x);
    st.forward_s += seconds_since(t0);
    if (!last) {
      send_act(mb, y, out_w, st);
    } else if (logits) {
      logits->insert(logits->end(), y.begin(), y.end());
    } else {
      // dLoss/dlogit of the whole batch's mean: (sigmoid - y) / B, times the weight.
      t0 = Clock::now();
      const std::size_t first = batch.size / micro * mb + std::min(mb, batch.size % micro);
      dlogits_[mb].resize(rows);
      const double mean = bce_with_logits<float>(y, std::span(batch.labels).subspan(first, rows), dlogits_[mb]);
      const float scale = static_cast<float>(weight * static_cast<double>(rows) / static_cast<double>(batch.size));
      for (float& d : dlogits_[mb]) d *= scale;
      st.loss_sum += mean * static_cast<double>(rows);
      st.samples += rows;
      st.correct += correct_predictions(y, std::span(batch.labels).subspan(first, rows));
      st.forward_s += seconds_since(t0);
    }
  }
}

PipelineStepStats Pipeline::step(const Batch& batch, std::uint64_t k, double weight,
                                 const std::function<bool()>& before_update, const Dlrm<float>::PooledSource* pooled) {
  PipelineStepStats st;
  at_ = fmt::format("step {}", k);
  in_step_ = true;
  non_finite_sent_ = false;
  if (batch.size == 0) {
    // Hybrid: a global batch smaller than the replica count leaves this
    // replica nothing; its stages contribute zero gradients to the exchange.
    model_.zero_grads();
    in_step_ = false;
    st.skipped = before_update && !before_update();
    if (!st.skipped) opt_.step();
    return st;
  }
  const std::size_t micro = std::min(micro_, batch.size);  // the same on every stage
  const bool last = stage_ + 1 == stages_;
  loss_scale_ = static_cast<float>(weight / static_cast<double>(batch.size));
  forward_all(batch, micro, weight, st, nullptr, pooled);
  const std::size_t in_w = model_.stage_in_width(), out_w = model_.stage_out_width();
  for (std::size_t mb = micro; mb-- > 0;) {
    const std::size_t rows = model_.micro_size(mb);
    const float* dy = last ? dlogits_[mb].data() : recv_grad(mb, rows, out_w, st).data();
    const auto t0 = Clock::now();
    const float* dx = model_.stage_backward(mb, dy);
    st.backward_s += seconds_since(t0);
    if (stage_ > 0) send_grad(mb, std::span<const float>(dx, rows * in_w), st);
  }
  in_step_ = false;
  auto t0 = Clock::now();
  model_.stage_end();  // the tables' gradients
  st.backward_s += seconds_since(t0);
  st.skipped = before_update && !before_update();
  if (!st.skipped) {  // a skipped step keeps the sketch's step number too
    ++step_;
    t0 = Clock::now();
    opt_.step();
    st.optimizer_s += seconds_since(t0);
  }
  wait_sends();
  return st;
}

std::vector<float> Pipeline::predict(const Batch& batch) {
  std::vector<float> logits;
  if (batch.size == 0) return logits;
  PipelineStepStats st;
  at_ = "prediction";
  in_step_ = false;
  forward_all(batch, 1, 1.0, st, &logits);
  wait_sends();
  return logits;
}

void Pipeline::save_state(BlobWriter& w) const {
  w.u64(grad_residual_.size());
  for (const auto& e : grad_residual_) w.floats(e);
}

void Pipeline::load_state(BlobReader& r) {
  const std::uint64_t n = r.u64();
  SPARQ_CHECK_AS(InputError, n == 0 || n == micro_, "{}: residuals of {} micro-batches, this pipeline has {}", r.what(),
                 n, micro_);
  grad_residual_.assign(n, {});
  for (auto& e : grad_residual_) e = r.floats();
}

}  // namespace sparq
