#include "sparq/train/grad_exchange.h"

#include <algorithm>
#include <charconv>

#include "sparq/coll/quantized.h"
#include "sparq/core/blob.h"
#include "sparq/core/finite.h"
#include "sparq/compress/topk.h"

namespace sparq {

namespace {

template <class T>
T number(std::string_view s, std::string_view spec, const char* what) {
  T v{};
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  SPARQ_CHECK_AS(InputError, ec == std::errc() && p == s.data() + s.size(), "bad --dp-codec '{}': {} '{}'", spec,
                 what, s);
  return v;
}

DpCodec parse_codec_only(std::string_view spec) {
  DpCodec c;
  c.text = std::string(spec);
  std::string_view s = spec;
  // At most one value-format suffix.
  for (const auto& [suffix, vf] : {std::pair{std::string_view("+bf16"), compress::ValueFormat::Bf16},
                                    std::pair{std::string_view("+fp8"), compress::ValueFormat::Fp8},
                                    std::pair{std::string_view("+fp4"), compress::ValueFormat::Fp4}})
    if (s.ends_with(suffix)) {
      SPARQ_CHECK_AS(InputError, s.starts_with("dct:") || s.starts_with("topk:"),
                     "bad --dp-codec '{}': {} applies to the sparse codecs dct and topk", spec, suffix);
      c.values = vf;
      s.remove_suffix(suffix.size());
      break;
    }
  if (s == "none") return c;
  if (s.starts_with("dct:")) {
    const auto body = s.substr(4);
    const auto comma = body.find(',');
    SPARQ_CHECK_AS(InputError, comma != std::string_view::npos, "bad --dp-codec '{}': expected dct:ETA,L", s);
    c.kind = DpCodec::Kind::Dct;
    c.eta = number<double>(body.substr(0, comma), s, "sparsity");
    c.life_span = number<std::uint64_t>(body.substr(comma + 1), s, "life span");
    SPARQ_CHECK_AS(InputError, c.eta >= 0 && c.eta < 1 && c.life_span >= 1,
                   "bad --dp-codec '{}': need 0 <= ETA < 1 and L >= 1", s);
    return c;
  }
  if (s.starts_with("topk:")) {
    const auto body = s.substr(5);
    const auto slash = body.find('/');
    SPARQ_CHECK_AS(InputError, slash != std::string_view::npos, "bad --dp-codec '{}': expected topk:K/BUCKET", s);
    c.kind = DpCodec::Kind::TopK;
    c.k = number<std::size_t>(body.substr(0, slash), s, "k");
    c.bucket = number<std::size_t>(body.substr(slash + 1), s, "bucket");
    SPARQ_CHECK_AS(InputError, c.k >= 1 && c.k <= c.bucket, "bad --dp-codec '{}': need 1 <= K <= BUCKET", s);
    return c;
  }
  c.kind = DpCodec::Kind::Quantized;
  if (s.starts_with("qsgd:")) {
    c.codec = parse_codec("qsgd" + std::string(s.substr(5)));
    return c;
  }
  // A bad row-wise spelling gets --dp-codec's list (parse_codec's says
  // qsgd2, not qsgd:2).
  auto unknown = [&] {
    SPARQ_THROW(InputError,
                "unknown --dp-codec '{}' (none, dct:ETA,L and topk:K/B with optional +bf16, +fp8 or +fp4, q8, q4, q2 with "
                "optional +ec or +ec-skip-first, qsgd:BITS)",
                s);
  };
  if (!s.starts_with("q")) unknown();
  try {
    c.codec = parse_codec(s);
  } catch (const InputError&) {
    unknown();
  }
  return c;
}

}  // namespace

DpCodec parse_dp_codec(std::string_view s, std::string_view allreduce) {
  DpCodec c = parse_codec_only(s);
  if (allreduce == "auto") return c;
  try {
    switch (c.kind) {
      case DpCodec::Kind::None: c.dense_algo = parse_allreduce_algo(allreduce); break;
      case DpCodec::Kind::Quantized: c.quant_algo = parse_quant_algo(allreduce); break;
      case DpCodec::Kind::Dct:
      case DpCodec::Kind::TopK: c.sparse_algo = parse_sparse_algo(allreduce); break;
    }
    SPARQ_CHECK_AS(InputError, c.values == compress::ValueFormat::F32 || c.sparse_algo != SparseAlgo::Dense,
                   "+bf16 and +fp8 need a sparse algorithm; 'dense' sends fp32");
    SPARQ_CHECK_AS(InputError, c.codec.ec_first_hop || c.quant_algo == QuantAlgo::Ring,
                   "+ec-skip-first is the ring's (Yang et al.'s Algorithm 2); use +ec");
  } catch (const InputError& e) {
    SPARQ_THROW(InputError, "--dp-allreduce '{}' does not fit --dp-codec '{}': {}", allreduce, s, e.what());
  }
  c.text += fmt::format(" ({})", allreduce);
  return c;
}

std::uint64_t dense_ring_bytes(int p, std::size_t n) {
  return p > 1 ? 2 * static_cast<std::uint64_t>(p - 1) * n * sizeof(float) / static_cast<std::uint64_t>(p) : 0;
}

std::uint64_t row_sparse_allgather_bytes(int p, std::size_t rows, std::size_t dim) {
  return p > 1 ? static_cast<std::uint64_t>(p - 1) * rows * (sizeof(std::uint32_t) + dim * sizeof(float)) : 0;
}

ExchangeStats& ExchangeStats::operator+=(const ExchangeStats& o) {
  bytes_sent += o.bytes_sent;
  dense_bytes += o.dense_bytes;
  compress_seconds += o.compress_seconds;
  comm_seconds += o.comm_seconds;
  wait_seconds += o.wait_seconds;
  modeled_seconds += o.modeled_seconds;
  kept += o.kept;
  values += o.values;
  counted = counted && o.counted;
  return *this;
}

GradExchange::GradExchange(DpCodec codec, compress::ErrorFeedbackStore& residuals)
    : codec_(std::move(codec)), residuals_(residuals) {
  // fp32 selection; the value format is applied to the bucket's whole stream (below).
  if (codec_.kind == DpCodec::Kind::Dct)
    dct_.emplace(compress::DctDpOptions{codec_.eta, codec_.life_span, 0.0, compress::ValueFormat::F32}, residuals_);
}

std::size_t GradExchange::select(std::string_view name, std::span<const float> grad, std::uint64_t step,
                                 compress::SparseStream& out) {
  if (codec_.kind == DpCodec::Kind::Dct) return dct_->step(name, step, grad, out).kept;
  // TopK SGD with error accumulation: W = g + E; send the top K of every
  // bucket of W; E = W - sent.
  const std::size_t n = grad.size();
  std::span<float> e = residuals_.residual(name, n);
  for (std::size_t i = 0; i < n; ++i) e[i] += grad[i];
  compress::bucket_topk(e, codec_.bucket, codec_.k, idx_, val_);
  for (std::uint32_t i : idx_) e[i] = 0;
  out.assign_sparse(n, idx_, val_);
  return idx_.size();
}

std::size_t GradExchange::select_bucket(std::span<const Piece> pieces, std::span<const float> grad,
                                        std::uint64_t step) {
  const std::size_t n = grad.size();
  if (pieces.size() == 1) {
    select(pieces[0].name, grad, step, stream_);  // the stream itself: no copy of the pairs
  } else {
    std::vector<std::uint32_t>& idx = bucket_idx_;
    std::vector<float>& val = bucket_val_;
    idx.clear();
    val.clear();
    std::size_t off = 0;
    for (const Piece& pc : pieces) {
      select(pc.name, grad.subspan(off, pc.size), step, piece_);
      for (std::uint32_t i : piece_.indices()) idx.push_back(static_cast<std::uint32_t>(off + i));
      val.insert(val.end(), piece_.values().begin(), piece_.values().end());
      off += pc.size;
    }
    SPARQ_CHECK(off == n, "bucket pieces cover {} of {} values", off, n);
    stream_.assign_sparse(n, idx, val);
  }
  // One value scale for the whole message: round, then hand each rounding
  // error to the residual of the tensor it came from.
  round_selected(stream_, taken_);
  const auto kept = stream_.indices();
  if (!taken_.empty()) {
    std::size_t off = 0, j = 0;
    for (const Piece& pc : pieces) {
      std::span<float> e = residuals_.residual(pc.name, pc.size);
      for (; j < kept.size() && kept[j] < off + pc.size; ++j) e[kept[j] - off] += taken_[j];
      off += pc.size;
    }
  }
  return kept.size();
}

void GradExchange::round_selected(compress::SparseStream& sent, std::vector<float>& taken) {
  taken.clear();
  if (codec_.values == compress::ValueFormat::F32) return;
  round_err_.resize(sent.dim());  // all zeros between calls
  compress::round_with_feedback(sent, round_err_, codec_.values);
  for (std::uint32_t i : sent.indices()) {
    taken.push_back(round_err_[i]);
    round_err_[i] = 0;
  }
}

GradExchange::TensorState GradExchange::tensor_state(std::string_view name) const {
  return {residuals_.find(name), dct_ ? dct_->threshold(name) : std::nullopt};
}

void GradExchange::set_tensor_state(std::string_view name, std::span<const float> residual,
                                    std::optional<float> tau) {
  SPARQ_CHECK_AS(InputError, !tau || dct_, "tensor '{}': codec {} keeps no threshold", name, codec_.text);
  std::span<float> e = residuals_.residual(name, residual.size());  // InputError on another size
  std::copy(residual.begin(), residual.end(), e.begin());
  if (tau) dct_->set_threshold(name, *tau);
}

ExchangeStats GradExchange::exchange(Transport& t, std::string_view name, std::span<float> grad, std::uint64_t step) {
  const Piece whole{std::string(name), grad.size()};
  return exchange(t, name, std::span<const Piece>(&whole, 1), grad, step);
}

void check_gradients(int rank, std::string_view bucket, std::span<const GradExchange::Piece> pieces,
                     std::span<const float> grad, std::uint64_t step) {
  std::size_t off = 0;
  for (const GradExchange::Piece& pc : pieces) {
    if (off + pc.size > grad.size()) break;  // exchange() says the pieces do not fit
    SPARQ_CHECK_FINITE(grad.subspan(off, pc.size), [&] {
      return fmt::format("rank {}, step {}: the gradient of '{}' (bucket '{}')", rank, step, pc.name, bucket);
    });
    off += pc.size;
  }
}

ExchangeStats GradExchange::exchange(Transport& t, std::string_view name, std::span<const Piece> pieces,
                                     std::span<float> grad, std::uint64_t step) {
  // Before any codec state changes, whatever the codec: the run stops on the
  // step a NaN or inf arrives, naming where (grad_exchange.h).
  check_gradients(t.rank(), name, pieces, grad, step);
  const int p = t.size();
  const std::size_t n = grad.size();
  ExchangeStats st;
  st.dense_bytes = dense_ring_bytes(p, n);
  st.kept = st.values = n;
  const float inv_p = 1.0f / static_cast<float>(p);
  CollStats cs;
  auto t0 = Clock::now();
  switch (codec_.kind) {
    case DpCodec::Kind::None: {
      cs = allreduce(t, grad, {.algo = codec_.dense_algo});
      st.comm_seconds = seconds_since(t0);
      for (float& g : grad) g *= inv_p;
      break;
    }
    case DpCodec::Kind::Quantized: {
      QuantizedAllreduceOptions o;
      o.codec = codec_.codec;
      o.residuals = &residuals_;
      o.tensor = std::string(name);
      o.step = step;
      o.algo = codec_.quant_algo;
      cs = quantized_allreduce(t, grad, o);
      st.comm_seconds = seconds_since(t0);
      for (float& g : grad) g *= inv_p;
      break;
    }
    case DpCodec::Kind::Dct:
    case DpCodec::Kind::TopK: {
      st.kept = select_bucket(pieces, grad, step);
      st.compress_seconds = seconds_since(t0);
      t0 = Clock::now();
      cs = allreduce_pairs(t, name, stream_, sum_);
      sum_.to_dense(grad, inv_p);
      st.comm_seconds = seconds_since(t0);
      break;
    }
  }
  st.bytes_sent = cs.wire.bytes_sent;
  st.counted = cs.counted;
  st.wait_seconds = st.compress_seconds + st.comm_seconds;
  return st;
}

CollStats GradExchange::allreduce_pairs(Transport& t, std::string_view name, const compress::SparseStream& sent,
                                        compress::SparseStream& sum) {
  SPARQ_CHECK_AS(InputError, codec_.kind == DpCodec::Kind::Dct || codec_.kind == DpCodec::Kind::TopK,
                 "exchange of selected pairs: codec {} sends no pairs", codec_.text);
  SparseAllreduceOptions o;
  o.algo = codec_.sparse_algo;
  o.values = codec_.values;
  auto h = auto_history_.find(name);
  if (h == auto_history_.end()) h = auto_history_.emplace(std::string(name), SparseAutoHistory{}).first;
  o.history = &h->second;
  return sparse_allreduce(t, sent, sum, o);
}

namespace {
constexpr std::string_view kStateMagic = "sparq grad exchange state 1";
}

void save_history(BlobWriter& w, const SparseAutoHistory& h) {
  w.u64(h.dim);
  w.u64(static_cast<std::uint64_t>(h.nranks));
  w.u64(h.result_nnz);
}

SparseAutoHistory load_history(BlobReader& r) {
  SparseAutoHistory h;
  h.dim = r.u64();
  h.nranks = static_cast<int>(r.u64());
  h.result_nnz = r.u64();
  return h;
}

std::vector<std::byte> GradExchange::save_state() const {
  BlobWriter w;
  w.str(kStateMagic);
  w.str(codec_.text);
  residuals_.save(w);
  w.u64(dct_ ? 1 : 0);
  if (dct_) dct_->save(w);
  w.u64(auto_history_.size());
  for (const auto& [name, h] : auto_history_) {
    w.str(name);
    save_history(w, h);
  }
  return w.take();
}

void GradExchange::load_state(std::span<const std::byte> blob) {
  BlobReader r(blob, "gradient exchange state");
  SPARQ_CHECK_AS(InputError, r.str() == kStateMagic, "not a gradient exchange state");
  const std::string codec = r.str();
  SPARQ_CHECK_AS(InputError, codec == codec_.text, "gradient exchange state of codec '{}' loaded into codec '{}'",
                 codec, codec_.text);
  residuals_.load(r);
  const bool has_dct = r.u64() != 0;
  SPARQ_CHECK_AS(InputError, has_dct == dct_.has_value(), "gradient exchange state: DCT-DP state does not fit '{}'",
                 codec_.text);
  if (dct_) dct_->load(r);
  const std::uint64_t n = r.u64();
  auto_history_.clear();
  for (std::uint64_t i = 0; i < n; ++i) {
    std::string name = r.str();
    auto_history_[std::move(name)] = load_history(r);
  }
  r.expect_end();
}

std::vector<std::byte> GradExchange::repartition_state(std::span<const std::vector<std::byte>> saved,
                                                       std::size_t rank, std::size_t ranks) {
  SPARQ_CHECK(rank < ranks && ranks < saved.size(), "repartition_state: rank {} of {} from {} saved", rank, ranks,
              saved.size());
  BlobReader head(saved[rank], "gradient exchange state");
  SPARQ_CHECK_AS(InputError, head.str() == kStateMagic, "not a gradient exchange state");
  const DpCodec codec = parse_dp_codec(head.str());
  compress::ErrorFeedbackStore store;
  GradExchange mine(codec, store);
  mine.load_state(saved[rank]);
  for (std::size_t r = rank + ranks; r < saved.size(); r += ranks) {
    compress::ErrorFeedbackStore theirs;
    GradExchange(codec, theirs).load_state(saved[r]);  // another codec's state is an InputError
    store.add(theirs);
  }
  mine.auto_history_.clear();
  return mine.save_state();
}

}  // namespace sparq
