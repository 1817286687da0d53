#include "sparq/compress/stream_codec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "sparq/compress/half.h"
#include "sparq/core/error.h"

namespace sparq::compress {

static_assert(std::endian::native == std::endian::little, "the wire formats are little-endian");

namespace {

enum Kind : std::uint8_t { kSparse = 1, kDense = 2 };
constexpr std::uint8_t kVarint = 0x80;

std::uint32_t load_u32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Index i of a run of c-byte indices.
template <std::size_t C>
std::uint32_t load_index(const std::uint8_t* p, std::size_t i) {
  if constexpr (C == 1) {
    return p[i];
  } else if constexpr (C == 2) {
    std::uint16_t v;
    std::memcpy(&v, p + 2 * i, 2);
    return v;
  } else {
    return load_u32(p + 4 * i);
  }
}

template <std::size_t C>
void store_indices(std::span<const std::uint32_t> idx, std::uint8_t* p) {
  for (std::size_t i = 0; i < idx.size(); ++i) {
    if constexpr (C == 1) {
      p[i] = static_cast<std::uint8_t>(idx[i]);
    } else if constexpr (C == 2) {
      const auto v = static_cast<std::uint16_t>(idx[i]);
      std::memcpy(p + 2 * i, &v, 2);
    } else {
      std::memcpy(p + 4 * i, &idx[i], 4);
    }
  }
}

void check_index(std::uint64_t v, std::size_t i, std::uint32_t dim, const std::uint32_t* out) {
  SPARQ_CHECK_AS(WireError, v < dim, "sparse stream: index {} at {} out of range [0, {})", v, i, dim);
  SPARQ_CHECK_AS(WireError, i == 0 || out[i - 1] < v, "sparse stream: index {} at {} not above {}", v, i, out[i - 1]);
}

// Reads n indices into out, rejecting any out of range or out of order.
template <std::size_t C>
void load_indices(const std::uint8_t* p, std::size_t n, std::uint32_t dim, std::uint32_t* out) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t v = load_index<C>(p, i);
    check_index(v, i, dim, out);
    out[i] = v;
  }
}

// The numbers a delta-varint run holds: the first index, then gaps minus one.
std::uint32_t delta(std::span<const std::uint32_t> idx, std::size_t i) {
  return i == 0 ? idx[0] : idx[i] - idx[i - 1] - 1;
}

std::size_t varint_len(std::uint32_t v) { return 1 + (v >= 1u << 7) + (v >= 1u << 14) + (v >= 1u << 21) + (v >= 1u << 28); }

std::size_t varint_run_bytes(std::span<const std::uint32_t> idx) {
  std::size_t b = 0;
  for (std::size_t i = 0; i < idx.size(); ++i) b += varint_len(delta(idx, i));
  return b;
}

void store_varints(std::span<const std::uint32_t> idx, std::uint8_t* p) {
  for (std::size_t i = 0; i < idx.size(); ++i) {
    std::uint32_t v = delta(idx, i);
    for (; v >= 0x80; v >>= 7) *p++ = static_cast<std::uint8_t>(v | 0x80);
    *p++ = static_cast<std::uint8_t>(v);
  }
}

// Decodes exactly run_bytes of varints into n indices.
void load_varints(const std::uint8_t* p, std::size_t run_bytes, std::size_t n, std::uint32_t dim,
                  std::uint32_t* out) {
  const std::uint8_t* end = p + run_bytes;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      SPARQ_CHECK_AS(WireError, p < end, "sparse stream: index run ends inside varint {} of {}", i, n);
      SPARQ_CHECK_AS(WireError, shift < 35, "sparse stream: varint {} longer than 5 bytes", i);
      const std::uint8_t b = *p++;
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) break;
    }
    if (i > 0) v += static_cast<std::uint64_t>(out[i - 1]) + 1;
    check_index(v, i, dim, out);
    out[i] = static_cast<std::uint32_t>(v);
  }
  SPARQ_CHECK_AS(WireError, p == end, "sparse stream: {} bytes left after the index run", end - p);
}

// 2^e as a double (exact for the int8 scales), and the fp8 scaling both
// ways: products with a power of two are exact in double, so each side
// rounds once, in the float conversion, the same on sender and receiver.
double pow2(int e) { return std::bit_cast<double>(static_cast<std::uint64_t>(1023 + e) << 52); }
float to_fp8_range(float v, int scale) { return static_cast<float>(static_cast<double>(v) * pow2(-scale)); }
float from_fp8(std::uint8_t q, int scale) { return static_cast<float>(static_cast<double>(e4m3_to_float(q)) * pow2(scale)); }

// The index coding byte and run length encode_stream will use.
struct IndexRun {
  std::uint8_t coding;
  std::size_t bytes;
};
IndexRun index_run(const SparseStream& s) {
  if (s.is_dense()) return {0, 0};
  const std::size_t c = index_bytes(s.dim()), fixed = c * s.nnz();
  // The varint run is at least n bytes: count it only when it can win.
  if (s.nnz() < fixed) {
    const std::size_t varint = varint_run_bytes(s.indices());
    if (varint < fixed) return {kVarint, varint};
  }
  return {static_cast<std::uint8_t>(c), fixed};
}

}  // namespace

int value_scale(std::span<const float> values, ValueFormat vf) {
  if (vf != ValueFormat::Fp8) return 0;
  float mx = 0.0f;
  for (std::size_t i = 0; i < values.size(); ++i) {
    SPARQ_CHECK_AS(InputError, std::isfinite(values[i]), "fp8 stream values: non-finite value {} at {}", values[i],
                   i);
    mx = std::max(mx, std::fabs(values[i]));
  }
  if (mx == 0.0f) return 0;
  int e;
  std::frexp(mx, &e);  // mx = m * 2^e, m in [0.5, 1): mx / 2^(e-8) in [128, 256)
  return std::clamp(e - 8, -128, 127);
}

float round_value(float v, ValueFormat vf, int scale) {
  switch (vf) {
    case ValueFormat::F32: return v;
    case ValueFormat::Bf16: return bf16_to_float(float_to_bf16(v));
    case ValueFormat::Fp8: return from_fp8(float_to_e4m3(to_fp8_range(v, scale)), scale);
  }
  return v;
}

void round_values(SparseStream& s, ValueFormat vf) {
  if (vf == ValueFormat::F32) return;
  const int scale = value_scale(s.values(), vf);
  for (float& v : s.mutable_values()) v = round_value(v, vf, scale);
}

std::size_t encoded_size(const SparseStream& s, ValueFormat vf) {
  return kStreamHeaderBytes + index_run(s).bytes + s.nnz() * value_bytes(vf);
}

void densify_if_smaller(SparseStream& s, ValueFormat vf) {
  if (!s.is_dense() && encoded_size(s, vf) > dense_encoded_size(s.dim(), vf)) s.make_dense();
}

void encode_stream(const SparseStream& s, std::span<std::byte> out, ValueFormat vf) {
  const IndexRun run = index_run(s);
  const std::size_t size = kStreamHeaderBytes + run.bytes + s.nnz() * value_bytes(vf);
  SPARQ_CHECK_AS(InputError, out.size() == size, "sparse stream encode: buffer {} bytes, needs {}", out.size(), size);
  auto* p = reinterpret_cast<std::uint8_t*>(out.data());
  const auto dim = static_cast<std::uint32_t>(s.dim()), n = static_cast<std::uint32_t>(s.nnz());
  p[0] = s.is_dense() ? kDense : kSparse;
  p[1] = run.coding;
  const int scale = value_scale(s.values(), vf);
  p[2] = static_cast<std::uint8_t>(vf);
  p[3] = static_cast<std::uint8_t>(static_cast<std::int8_t>(scale));
  std::memcpy(p + 4, &dim, 4);
  std::memcpy(p + 8, &n, 4);
  std::uint8_t* body = p + kStreamHeaderBytes;
  switch (run.coding) {
    case 1: store_indices<1>(s.indices(), body); break;
    case 2: store_indices<2>(s.indices(), body); break;
    case 4: store_indices<4>(s.indices(), body); break;
    case kVarint: store_varints(s.indices(), body); break;
    default: break;  // dense: no run
  }
  store_values(s.values(), vf, scale, reinterpret_cast<std::byte*>(body + run.bytes));
}

void store_values(std::span<const float> values, ValueFormat vf, int scale, std::byte* out) {
  auto* vals = reinterpret_cast<std::uint8_t*>(out);
  switch (vf) {
    case ValueFormat::F32:
      if (!values.empty()) std::memcpy(vals, values.data(), values.size_bytes());
      break;
    case ValueFormat::Bf16:
      for (float v : values) {
        const std::uint16_t h = float_to_bf16(v);
        std::memcpy(vals, &h, 2);
        vals += 2;
      }
      break;
    case ValueFormat::Fp8:
      for (float v : values) *vals++ = float_to_e4m3(to_fp8_range(v, scale));
      break;
  }
}

void load_values(const std::byte* in, ValueFormat vf, int scale, std::span<float> values) {
  const auto* vals = reinterpret_cast<const std::uint8_t*>(in);
  switch (vf) {
    case ValueFormat::F32:
      if (!values.empty()) std::memcpy(values.data(), vals, values.size_bytes());
      break;
    case ValueFormat::Bf16:
      for (std::size_t i = 0; i < values.size(); ++i) {
        std::uint16_t h;
        std::memcpy(&h, vals + 2 * i, 2);
        values[i] = bf16_to_float(h);
      }
      break;
    case ValueFormat::Fp8:
      for (std::size_t i = 0; i < values.size(); ++i) values[i] = from_fp8(vals[i], scale);
      break;
  }
}

SparseStream decode_stream(std::span<const std::byte> in) {
  SPARQ_CHECK_AS(WireError, in.size() >= kStreamHeaderBytes, "sparse stream: {} bytes, shorter than the header",
                 in.size());
  const auto* p = reinterpret_cast<const std::uint8_t*>(in.data());
  const std::uint8_t kind = p[0], coding = p[1], format = p[2];
  const std::uint32_t dim = load_u32(p + 4), n = load_u32(p + 8);
  SPARQ_CHECK_AS(WireError, kind == kSparse || kind == kDense, "sparse stream: unknown kind {}", kind);
  SPARQ_CHECK_AS(WireError, format <= 2, "sparse stream: unknown value format {}", format);
  const auto vf = static_cast<ValueFormat>(format);
  const int scale = static_cast<std::int8_t>(p[3]);
  SPARQ_CHECK_AS(WireError, vf == ValueFormat::Fp8 || scale == 0, "sparse stream: scale byte {} not zero", p[3]);
  const bool dense = kind == kDense;
  const std::size_t c = dense ? 0 : index_bytes(dim);
  SPARQ_CHECK_AS(WireError, coding == c || (!dense && coding == kVarint),
                 "sparse stream: index coding {} for a {} stream of dimension {} (expected {}{})", coding,
                 dense ? "dense" : "sparse", dim, c, dense ? "" : " or 128");
  SPARQ_CHECK_AS(WireError, dense ? n == dim : n <= dim, "sparse stream: {} entries for dimension {}", n, dim);
  const std::size_t vb = value_bytes(vf);
  // 64-bit arithmetic: n < 2^32 and c + vb <= 8, so no overflow.
  const std::uint64_t values_bytes = static_cast<std::uint64_t>(n) * vb;
  std::uint64_t run_bytes = static_cast<std::uint64_t>(n) * c;
  if (coding == kVarint) {
    // At least one byte per index; the run must then decode exactly.
    SPARQ_CHECK_AS(WireError, in.size() >= kStreamHeaderBytes + values_bytes + n,
                   "sparse stream: {} bytes, too short for {} varint pairs", in.size(), n);
    run_bytes = in.size() - kStreamHeaderBytes - values_bytes;
  }
  const std::uint64_t want = kStreamHeaderBytes + run_bytes + values_bytes;
  SPARQ_CHECK_AS(WireError, in.size() == want, "sparse stream: {} bytes, header says {}", in.size(), want);
  SparseStream s(dim);
  s.dense_ = dense;
  s.count_ = n;
  const std::uint8_t* body = p + kStreamHeaderBytes;
  if (!dense) {
    s.indices_.resize(n);
    switch (coding) {
      case 1: load_indices<1>(body, n, dim, s.indices_.data()); break;
      case 2: load_indices<2>(body, n, dim, s.indices_.data()); break;
      case 4: load_indices<4>(body, n, dim, s.indices_.data()); break;
      default: load_varints(body, run_bytes, n, dim, s.indices_.data()); break;
    }
  }
  s.values_.resize(n);
  load_values(reinterpret_cast<const std::byte*>(body + run_bytes), vf, scale, s.values_);
  return s;
}

}  // namespace sparq::compress
