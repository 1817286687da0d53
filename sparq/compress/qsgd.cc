#include "sparq/compress/qsgd.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <thread>
#include <vector>

#include "sparq/compress/bitpack.h"
#include "sparq/compress/counter_rng.h"
#include "sparq/core/error.h"

namespace sparq::compress {

namespace {

constexpr std::size_t kMaxBucket = std::size_t{1} << 34;  // 2^32 Philox blocks of 4 values

int magnitude_levels(int bits) { return (1 << (bits - 1)) - 1; }

void check_options(const QsgdOptions& o) {
  check_code_bits(o.bits);
  SPARQ_CHECK_AS(InputError, o.bucket > 0 && o.bucket <= kMaxBucket, "QSGD: bucket size {} out of range", o.bucket);
  SPARQ_CHECK_AS(InputError, o.threads >= 1, "QSGD: threads must be >= 1, got {}", o.threads);
}

std::size_t bucket_bytes(std::size_t len, int bits) { return 4 + packed_bytes(len, bits); }

// The bucket norm, accumulated in double over 8 lanes (vectorizable, and no
// overflow of the sum of squares for any finite float input).
float bucket_norm(const float* x, std::size_t n, QsgdNorm kind, std::size_t bucket_index) {
  constexpr std::size_t W = 8;
  double acc[W] = {};
  float nan_acc[W] = {};
  std::size_t i = 0;
  for (; i + W <= n; i += W)
    for (std::size_t j = 0; j < W; ++j) {
      const float v = x[i + j];
      nan_acc[j] += v - v;  // NaN iff some v is NaN or inf
      if (kind == QsgdNorm::L2)
        acc[j] += static_cast<double>(v) * v;
      else
        acc[j] = std::max(acc[j], static_cast<double>(std::fabs(v)));
    }
  for (; i < n; ++i) {
    const float v = x[i];
    nan_acc[0] += v - v;
    if (kind == QsgdNorm::L2)
      acc[0] += static_cast<double>(v) * v;
    else
      acc[0] = std::max(acc[0], static_cast<double>(std::fabs(v)));
  }
  double total = 0;
  bool finite = true;
  for (std::size_t j = 0; j < W; ++j) {
    total = kind == QsgdNorm::L2 ? total + acc[j] : std::max(total, acc[j]);
    finite = finite && nan_acc[j] == 0.0f;
  }
  SPARQ_CHECK_AS(NonFiniteError, finite, "QSGD: bucket {} holds NaN or inf", bucket_index);
  return static_cast<float>(kind == QsgdNorm::L2 ? std::sqrt(total) : total);
}

struct BucketKey {
  std::uint64_t seed;
  std::uint32_t step, tensor;
};

void quantize_bucket(const float* x, std::size_t n, std::size_t b, const QsgdOptions& o, BucketKey key,
                     std::uint8_t* out) {
  const float norm = bucket_norm(x, n, o.norm, b);
  std::memcpy(out, &norm, 4);
  std::uint8_t* codes_out = out + 4;
  const int s = magnitude_levels(o.bits);
  constexpr std::size_t kChunk = 512;  // multiple of 4: chunks start on Philox blocks and packed bytes
  std::uint8_t codes[kChunk];
  float u[kChunk];
  // |v| / norm <= 1 is computed first: s / norm would overflow to inf for a
  // subnormal norm, and 0 * inf is NaN.
  const float divisor = norm > 0.0f ? norm : 1.0f;  // a zero bucket: every |v| / 1 = 0
  for (std::size_t c0 = 0; c0 < n; c0 += kChunk) {
    const std::size_t len = std::min(kChunk, n - c0);
    philox_uniforms({static_cast<std::uint32_t>(c0 / 4), static_cast<std::uint32_t>(b), key.step, key.tensor},
                    key.seed, (len + 3) / 4, u);
    for (std::size_t i = 0; i < len; ++i) {
      const float v = x[c0 + i];
      float a = std::fabs(v) / divisor * static_cast<float>(s);
      a = a > static_cast<float>(s) ? static_cast<float>(s) : a;  // float rounding past s
      const int lo = static_cast<int>(a);                          // floor: a >= 0
      const int level = lo + (u[i] < a - static_cast<float>(lo) ? 1 : 0);
      codes[i] = static_cast<std::uint8_t>(s + (v < 0.0f ? -level : level));
    }
    pack_codes({codes, len}, o.bits, {codes_out + packed_bytes(c0, o.bits), packed_bytes(len, o.bits)});
  }
}

void dequantize_bucket(const std::uint8_t* in, std::size_t n, std::size_t b, int bits, float* out) {
  float norm;
  std::memcpy(&norm, in, 4);
  SPARQ_CHECK_AS(WireError, std::isfinite(norm) && norm >= 0.0f, "QSGD: bucket {} has norm {}", b, norm);
  const int s = magnitude_levels(bits);
  const float step = norm / static_cast<float>(s);
  constexpr std::size_t kChunk = 512;
  std::uint8_t codes[kChunk];
  for (std::size_t c0 = 0; c0 < n; c0 += kChunk) {
    const std::size_t len = std::min(kChunk, n - c0);
    unpack_codes({in + 4 + packed_bytes(c0, bits), packed_bytes(len, bits)}, bits, {codes, len});
    std::uint8_t worst = 0;
    for (std::size_t i = 0; i < len; ++i) {
      worst = std::max(worst, codes[i]);
      out[c0 + i] = step * static_cast<float>(static_cast<int>(codes[i]) - s);
    }
    SPARQ_CHECK_AS(WireError, worst <= 2 * s, "QSGD: bucket {} has code {} > {}", b, worst, 2 * s);
  }
}

// Runs f(first_bucket, last_bucket) over `threads` contiguous ranges.
template <class F>
void for_bucket_ranges(std::size_t buckets, int threads, F&& f) {
  const std::size_t t = std::min<std::size_t>(static_cast<std::size_t>(threads), std::max<std::size_t>(buckets, 1));
  if (t <= 1) {
    f(std::size_t{0}, buckets);
    return;
  }
  std::vector<std::thread> pool;
  std::vector<std::exception_ptr> errors(t);
  for (std::size_t k = 0; k < t; ++k)
    pool.emplace_back([&, k] {
      try {
        f(buckets * k / t, buckets * (k + 1) / t);
      } catch (...) {
        errors[k] = std::current_exception();
      }
    });
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace

std::size_t qsgd_bytes(std::size_t count, const QsgdOptions& o) {
  check_options(o);
  const std::size_t full = count / o.bucket, tail = count % o.bucket;
  return full * bucket_bytes(o.bucket, o.bits) + (tail ? bucket_bytes(tail, o.bits) : 0);
}

void qsgd_quantize(std::span<const float> x, const QsgdOptions& o, std::uint64_t step, std::uint64_t tensor,
                   std::span<std::byte> out) {
  const std::size_t need = qsgd_bytes(x.size(), o);
  SPARQ_CHECK_AS(InputError, out.size() == need, "QSGD: output has {} bytes, needs {}", out.size(), need);
  const std::size_t buckets = (x.size() + o.bucket - 1) / o.bucket;
  SPARQ_CHECK_AS(InputError, buckets <= 0xffffffffu, "QSGD: {} buckets exceed 2^32", buckets);
  const BucketKey key{o.seed, static_cast<std::uint32_t>(step), static_cast<std::uint32_t>(tensor ^ (tensor >> 32))};
  auto* p = reinterpret_cast<std::uint8_t*>(out.data());
  const std::size_t stride = bucket_bytes(o.bucket, o.bits);
  for_bucket_ranges(buckets, o.threads, [&](std::size_t b0, std::size_t b1) {
    for (std::size_t b = b0; b < b1; ++b) {
      const std::size_t first = b * o.bucket, n = std::min(o.bucket, x.size() - first);
      quantize_bucket(x.data() + first, n, b, o, key, p + b * stride);
    }
  });
}

void qsgd_dequantize(std::span<const std::byte> in, const QsgdOptions& o, std::span<float> out) {
  const std::size_t need = qsgd_bytes(out.size(), o);
  SPARQ_CHECK_AS(WireError, in.size() == need, "QSGD: got {} bytes, {} values need {}", in.size(), out.size(), need);
  const auto* p = reinterpret_cast<const std::uint8_t*>(in.data());
  const std::size_t buckets = (out.size() + o.bucket - 1) / o.bucket;
  const std::size_t stride = bucket_bytes(o.bucket, o.bits);
  for_bucket_ranges(buckets, o.threads, [&](std::size_t b0, std::size_t b1) {
    for (std::size_t b = b0; b < b1; ++b) {
      const std::size_t first = b * o.bucket, n = std::min(o.bucket, out.size() - first);
      dequantize_bucket(p + b * stride, n, b, o.bits, out.data() + first);
    }
  });
}

}  // namespace sparq::compress
