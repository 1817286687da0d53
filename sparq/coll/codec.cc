#include "sparq/coll/codec.h"

#include <cstring>

#include "sparq/core/error.h"
#include "sparq/core/kernel_costs.h"

namespace sparq {

namespace {
// Full rows of row_len, then one shorter row for the remainder.
struct Rows {
  std::size_t full, tail;
};
Rows rows_of(std::size_t n, std::size_t row_len) { return {n / row_len, n % row_len}; }

// On the virtual clock a codec is charged by its count of values
// (kernel_costs.h): its CPU time per value is set by its format, not by
// the values, and charged as measured it carried the machine's load into
// every compressed plan's step (a q4 plan against its fp32 twin, a few per
// cent apart, ranked by the moment each was sampled). QSGD's threads are
// part of the shape: the calling thread does only its share.
ChargedKernel charged_codec(const char* op, const Codec& c, std::size_t n) {
  const bool qsgd = c.kind == Codec::Kind::Qsgd;
  return ChargedKernel(op, Units{n}, static_cast<std::size_t>(c.kind),
                       static_cast<std::size_t>(qsgd ? c.qsgd.bits : c.rowwise.bits),
                       qsgd ? c.qsgd.bucket : c.row_len,
                       qsgd ? static_cast<std::size_t>(c.qsgd.threads) : static_cast<std::size_t>(c.rowwise.scale));
}
}  // namespace

std::size_t Codec::bytes(std::size_t n) const {
  switch (kind) {
    case Kind::Fp32: return n * sizeof(float);
    case Kind::Qsgd: return compress::qsgd_bytes(n, qsgd);
    case Kind::Rowwise: {
      const Rows r = rows_of(n, row_len);
      return compress::RowwiseLayout{row_len, rowwise}.bytes(r.full) +
             (r.tail ? compress::RowwiseLayout{r.tail, rowwise}.bytes(1) : 0);
    }
  }
  return 0;
}

void Codec::encode(std::span<const float> x, std::span<std::byte> out, std::uint64_t step, std::uint64_t key) const {
  SPARQ_CHECK(out.size() == bytes(x.size()), "codec {}: {} bytes for {} values, expected {}", name(), out.size(),
              x.size(), bytes(x.size()));
  const ChargedKernel charged = charged_codec("codec_encode_per_value", *this, x.size());
  switch (kind) {
    case Kind::Fp32:
      if (!x.empty()) std::memcpy(out.data(), x.data(), out.size());
      return;
    case Kind::Qsgd: compress::qsgd_quantize(x, qsgd, step, key, out); return;
    case Kind::Rowwise: {
      const Rows r = rows_of(x.size(), row_len);
      const std::size_t head = compress::RowwiseLayout{row_len, rowwise}.bytes(r.full);
      if (r.full) compress::rowwise_quantize(x.first(r.full * row_len), row_len, rowwise, out.first(head));
      if (r.tail) compress::rowwise_quantize(x.subspan(r.full * row_len), r.tail, rowwise, out.subspan(head));
      return;
    }
  }
}

void Codec::encode_ec(std::span<const float> x, std::span<float> err, std::span<std::byte> out) const {
  SPARQ_CHECK(kind == Kind::Rowwise, "codec {}: error compensation is row-wise only", name());
  SPARQ_CHECK(out.size() == bytes(x.size()) && err.size() == x.size(), "codec {}: {} bytes, {} residuals for {} values",
              name(), out.size(), err.size(), x.size());
  const ChargedKernel charged = charged_codec("codec_encode_ec_per_value", *this, x.size());
  const Rows r = rows_of(x.size(), row_len);
  const std::size_t head = compress::RowwiseLayout{row_len, rowwise}.bytes(r.full);
  const std::size_t split = r.full * row_len;
  if (r.full) compress::rowwise_quantize_ec(x.first(split), err.first(split), row_len, rowwise, out.first(head));
  if (r.tail) compress::rowwise_quantize_ec(x.subspan(split), err.subspan(split), r.tail, rowwise, out.subspan(head));
}

void Codec::decode(std::span<const std::byte> in, std::span<float> out) const {
  SPARQ_CHECK_AS(WireError, in.size() == bytes(out.size()), "codec {}: {} bytes received for {} values, expected {}",
                 name(), in.size(), out.size(), bytes(out.size()));
  const ChargedKernel charged = charged_codec("codec_decode_per_value", *this, out.size());
  switch (kind) {
    case Kind::Fp32:
      if (!out.empty()) std::memcpy(out.data(), in.data(), in.size());
      return;
    case Kind::Qsgd: compress::qsgd_dequantize(in, qsgd, out); return;
    case Kind::Rowwise: {
      const Rows r = rows_of(out.size(), row_len);
      const std::size_t head = compress::RowwiseLayout{row_len, rowwise}.bytes(r.full);
      if (r.full) compress::rowwise_dequantize(in.first(head), row_len, rowwise, out.first(r.full * row_len));
      if (r.tail) compress::rowwise_dequantize(in.subspan(head), r.tail, rowwise, out.subspan(r.full * row_len));
      return;
    }
  }
}

std::string Codec::name() const {
  switch (kind) {
    case Kind::Fp32: return "fp32";
    case Kind::Qsgd: return fmt::format("qsgd{}", qsgd.bits);
    case Kind::Rowwise:
      return fmt::format("q{}{}", rowwise.bits, !error_comp ? "" : ec_first_hop ? "+ec" : "+ec-skip-first");
  }
  return "?";
}

Codec parse_codec(std::string_view s) {
  Codec c;
  if (s == "fp32" || s == "none") return c;
  if (s.starts_with("qsgd")) {
    c.kind = Codec::Kind::Qsgd;
    const auto b = s.substr(4);
    SPARQ_CHECK_AS(InputError, b == "2" || b == "4" || b == "8", "bad codec '{}': qsgd2, qsgd4 or qsgd8", s);
    c.qsgd.bits = b[0] - '0';
    return c;
  }
  const std::string_view spec = s;
  for (const std::string_view suffix : {"+ec", "+ec-skip-first"})
    if (s.ends_with(suffix)) {
      c.error_comp = true;
      c.ec_first_hop = suffix == "+ec";
      s.remove_suffix(suffix.size());
      break;
    }
  SPARQ_CHECK_AS(InputError, s == "q8" || s == "q4" || s == "q2",
                 "bad codec '{}': fp32, q8, q4, q2 (optionally +ec or +ec-skip-first), qsgd2, qsgd4, qsgd8", spec);
  c.kind = Codec::Kind::Rowwise;
  c.rowwise.bits = s[1] - '0';
  return c;
}

}  // namespace sparq
