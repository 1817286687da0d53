#pragma once
// QSGD stochastic quantization (Alistarh et al., NeurIPS'17), as SparCML uses
// it for the dense phase of a sparse allreduce (SparCML sec. 6).
//
// The vector is cut into buckets of `bucket` consecutive values (the last one
// may be shorter). Per bucket, with norm n (L2 as in QSGD, or max-abs) and
// s = 2^(bits-1) - 1 magnitude levels, each value x becomes
//   level = floor(a) + [u < a - floor(a)],  a = min(s, |x| / n * s),  u ~ U[0, 1),
// so that E[n * sign(x) * level / s] = x (unbiased). The code sent is
// s + sign(x) * level, in [0, 2s]: one q-bit code per value (code 2^q - 1 is
// never produced and is rejected by the decoder).
//
// u comes from Philox4x32-10 keyed by `seed`, with counter
//   (value index / 4 within the bucket, bucket index, step, fold(tensor)),
// so a given (seed, step, tensor, bucket) always draws the same numbers no
// matter how buckets are spread over threads. Limits: < 2^32 buckets,
// bucket < 2^34; step and the tensor id are folded to 32 bits.
//
// Wire layout, buckets back to back, little-endian:
//   [norm: f32][codes: ceil(len*q/8) bytes, see bitpack.h]
// A bucket whose norm is 0 has all codes s (zeros). Non-finite input throws
// InputError (no meaningful norm).
#include <cstddef>
#include <cstdint>
#include <span>

namespace sparq::compress {

enum class QsgdNorm { L2, Max };

struct QsgdOptions {
  int bits = 4;              // 2, 4 or 8 (sign included)
  std::size_t bucket = 512;  // values per bucket, > 0
  QsgdNorm norm = QsgdNorm::L2;
  std::uint64_t seed = 0;
  int threads = 1;  // buckets are split over this many threads; the result does not depend on it
};

// Bytes of the encoding of `count` values.
std::size_t qsgd_bytes(std::size_t count, const QsgdOptions& opts);

// Encodes x for (step, tensor); out.size() == qsgd_bytes(x.size(), opts).
// Throws InputError on bad options, sizes, or non-finite input.
void qsgd_quantize(std::span<const float> x, const QsgdOptions& opts, std::uint64_t step, std::uint64_t tensor,
                   std::span<std::byte> out);

// Decodes out.size() values. Throws WireError if in.size() is not
// qsgd_bytes(out.size(), opts), a norm is not finite and >= 0, or a code
// exceeds 2s.
void qsgd_dequantize(std::span<const std::byte> in, const QsgdOptions& opts, std::span<float> out);

}  // namespace sparq::compress
