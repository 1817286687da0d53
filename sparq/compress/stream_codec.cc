#include "sparq/compress/stream_codec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

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
// v's code at the message scale; near float's largest (scale 2^120 and up)
// the code below where rounding up would decode beyond float.
std::uint8_t to_fp8(float v, int scale) {
  const std::uint8_t q = float_to_e4m3(to_fp8_range(v, scale));
  // Below 2^120, 448 (the largest code) times the scale is a float.
  return scale >= 120 && std::isinf(from_fp8(q, scale)) ? static_cast<std::uint8_t>(q - 1) : q;
}

// fp4 (E2M1: sign, 2 exponent bits, 1 mantissa bit) magnitudes by code & 7,
// and the midpoints between neighbours.
constexpr double kFp4[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
constexpr double kFp4Mid[7] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5};

// A group's scale exponent e: the least with max |v| <= 6 * 2^e, so nothing
// saturates (OCP's MX formats take floor(log2 max) - 2 and clip instead);
// clamped to int8. Non-finite values throw InputError.
int fp4_scale(std::span<const float> group) {
  float mx = 0.0f;
  for (std::size_t i = 0; i < group.size(); ++i) {
    SPARQ_CHECK_AS(NonFiniteError, std::isfinite(group[i]), "fp4 stream values: non-finite value {} at {}", group[i],
                   i);
    mx = std::max(mx, std::fabs(group[i]));
  }
  if (mx == 0.0f) return 0;
  int e;
  const double m = std::frexp(static_cast<double>(mx), &e);  // mx = m * 2^e, m in [0.5, 1)
  return std::clamp(m <= 0.75 ? e - 3 : e - 2, -128, 127);
}

// The code of v at scale 2^e: round to nearest on the E2M1 grid, ties to the
// even code (mantissa bit 0), zero always positive; near float's largest
// (scale 2^126) the next code down where a code's value is beyond float.
std::uint8_t to_fp4(float v, int e) {
  const double x = std::fabs(static_cast<double>(v)) * pow2(-e);  // exact: a power-of-two scale
  std::uint8_t code = 0;
  for (int i = 0; i < 7; ++i) code += x > kFp4Mid[i] || (x == kFp4Mid[i] && i % 2 == 1);
  while (kFp4[code] * pow2(e) > std::numeric_limits<float>::max()) --code;
  return code == 0 ? 0 : static_cast<std::uint8_t>(code | (std::signbit(v) ? 8 : 0));
}

// Code 8 (-0) and codes beyond float's range are never written: a decoder
// refuses them, so every message has one finite reading and re-encodes to
// the same values.
float from_fp4(std::uint8_t code, int e) {
  SPARQ_CHECK_AS(WireError, code != 8, "sparse stream: fp4 code 8 (negative zero), which no encoder writes");
  const double m = kFp4[code & 7] * pow2(e);
  SPARQ_CHECK_AS(WireError, m <= std::numeric_limits<float>::max(), "sparse stream: fp4 code {} at scale 2^{} is "
                 "beyond float's range", code, e);
  return static_cast<float>(code & 8 ? -m : m);
}

// Each group of kFp4Group values: its scale byte (int8 e), then its codes,
// two a byte, the first in the low nibble.
void store_fp4(std::span<const float> values, std::uint8_t* out) {
  for (std::size_t g = 0; g < values.size(); g += kFp4Group) {
    const auto group = values.subspan(g, std::min(kFp4Group, values.size() - g));
    const int e = fp4_scale(group);
    *out++ = static_cast<std::uint8_t>(static_cast<std::int8_t>(e));
    for (std::size_t i = 0; i < group.size(); i += 2)
      *out++ = static_cast<std::uint8_t>(to_fp4(group[i], e) | (i + 1 < group.size() ? to_fp4(group[i + 1], e) << 4 : 0));
  }
}

void load_fp4(const std::uint8_t* in, std::span<float> values) {
  for (std::size_t g = 0; g < values.size(); g += kFp4Group) {
    const std::size_t len = std::min(kFp4Group, values.size() - g);
    const int e = static_cast<std::int8_t>(*in++);
    for (std::size_t i = 0; i < len; i += 2, ++in) {
      values[g + i] = from_fp4(*in & 15, e);
      if (i + 1 < len) values[g + i + 1] = from_fp4(*in >> 4, e);
    }
  }
}

// Rounds each group to fp4 in place (what a peer decodes).
void round_fp4(std::span<float> values) {
  for (std::size_t g = 0; g < values.size(); g += kFp4Group) {
    const auto group = values.subspan(g, std::min(kFp4Group, values.size() - g));
    const int e = fp4_scale(group);
    for (float& v : group) v = from_fp4(to_fp4(v, e), e);
  }
}

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

// The fp8 message scale (0 for the other formats); non-finite values throw
// InputError.
int value_scale(std::span<const float> values, ValueFormat vf) {
  if (vf != ValueFormat::Fp8) return 0;
  float mx = 0.0f;
  for (std::size_t i = 0; i < values.size(); ++i) {
    SPARQ_CHECK_AS(NonFiniteError, std::isfinite(values[i]), "fp8 stream values: non-finite value {} at {}", values[i],
                   i);
    mx = std::max(mx, std::fabs(values[i]));
  }
  if (mx == 0.0f) return 0;
  int e;
  const float m = std::frexp(mx, &e);  // mx = m * 2^e, m in [0.5, 1)
  // mx / 2^s in (128, 256], a power of two on 256: rounding carries the
  // largest at most to 256 * 2^s, which keeps the scale, so values rounded
  // once round to themselves (a sender's rounded stream, re-encoded by the
  // sparse allreduce, loses nothing more).
  return std::clamp(m == 0.5f ? e - 9 : e - 8, -128, 127);
}

}  // namespace

void round_values(std::span<float> values, ValueFormat vf) {
  switch (vf) {
    case ValueFormat::F32: return;
    case ValueFormat::Bf16:
      for (float& v : values) v = bf16_to_float(float_to_bf16(v));
      return;
    case ValueFormat::Fp8: {
      const int scale = value_scale(values, vf);
      for (float& v : values) v = from_fp8(to_fp8(v, scale), scale);
      return;
    }
    case ValueFormat::Fp4: round_fp4(values); return;
  }
}

void round_values(SparseStream& s, ValueFormat vf) { round_values(s.mutable_values(), vf); }

std::size_t encoded_size(const SparseStream& s, ValueFormat vf) {
  return kStreamHeaderBytes + index_run(s).bytes + values_bytes(s.nnz(), vf);
}

void densify_if_smaller(SparseStream& s, ValueFormat vf) {
  if (!s.is_dense() && encoded_size(s, vf) > dense_encoded_size(s.dim(), vf)) s.make_dense();
}

void encode_stream(const SparseStream& s, std::span<std::byte> out, ValueFormat vf) {
  const IndexRun run = index_run(s);
  const std::size_t size = kStreamHeaderBytes + run.bytes + values_bytes(s.nnz(), vf);
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
      for (float v : values) *vals++ = to_fp8(v, scale);
      break;
    case ValueFormat::Fp4: store_fp4(values, vals); break;
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
      for (std::size_t i = 0; i < values.size(); ++i) {
        // No encoder writes NaN's codes (it refuses non-finite values), nor
        // codes beyond float at the message's scale (to_fp8).
        SPARQ_CHECK_AS(WireError, (vals[i] & 0x7fu) != 0x7fu, "sparse stream: fp8 code {:#x} (NaN), which no "
                       "encoder writes", vals[i]);
        values[i] = from_fp8(vals[i], scale);
        SPARQ_CHECK_AS(WireError, !std::isinf(values[i]), "sparse stream: fp8 code {:#x} at scale 2^{} is beyond "
                       "float's range", vals[i], scale);
      }
      break;
    case ValueFormat::Fp4: load_fp4(vals, values); break;
  }
}

SparseStream decode_stream(std::span<const std::byte> in) {
  SPARQ_CHECK_AS(WireError, in.size() >= kStreamHeaderBytes, "sparse stream: {} bytes, shorter than the header",
                 in.size());
  const auto* p = reinterpret_cast<const std::uint8_t*>(in.data());
  const std::uint8_t kind = p[0], coding = p[1], format = p[2];
  const std::uint32_t dim = load_u32(p + 4), n = load_u32(p + 8);
  SPARQ_CHECK_AS(WireError, kind == kSparse || kind == kDense, "sparse stream: unknown kind {}", kind);
  SPARQ_CHECK_AS(WireError, format <= 3, "sparse stream: unknown value format {}", format);
  const auto vf = static_cast<ValueFormat>(format);
  const int scale = static_cast<std::int8_t>(p[3]);
  SPARQ_CHECK_AS(WireError, vf == ValueFormat::Fp8 || scale == 0, "sparse stream: scale byte {} not zero", p[3]);
  const bool dense = kind == kDense;
  const std::size_t c = dense ? 0 : index_bytes(dim);
  SPARQ_CHECK_AS(WireError, coding == c || (!dense && coding == kVarint),
                 "sparse stream: index coding {} for a {} stream of dimension {} (expected {}{})", coding,
                 dense ? "dense" : "sparse", dim, c, dense ? "" : " or 128");
  SPARQ_CHECK_AS(WireError, dense ? n == dim : n <= dim, "sparse stream: {} entries for dimension {}", n, dim);
  // 64-bit arithmetic: n < 2^32 and at most 8 bytes a pair, so no overflow.
  const std::uint64_t vbytes = values_bytes(n, vf);
  std::uint64_t run_bytes = static_cast<std::uint64_t>(n) * c;
  if (coding == kVarint) {
    // At least one byte per index; the run must then decode exactly.
    SPARQ_CHECK_AS(WireError, in.size() >= kStreamHeaderBytes + vbytes + n,
                   "sparse stream: {} bytes, too short for {} varint pairs", in.size(), n);
    run_bytes = in.size() - kStreamHeaderBytes - vbytes;
  }
  const std::uint64_t want = kStreamHeaderBytes + run_bytes + vbytes;
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
