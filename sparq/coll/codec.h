#pragma once
// Wire codecs of the quantized collectives: how a run of floats becomes bytes
// for one hop and back. `none` is fp32; `rowwise` is Yang et al.'s row-wise
// asymmetric quantizer over rows of `row_len` values (a shorter last row
// where the run does not divide); `qsgd` is QSGD over buckets.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "sparq/compress/qsgd.h"
#include "sparq/compress/rowwise_quant.h"

namespace sparq {

struct Codec {
  enum class Kind { Fp32, Rowwise, Qsgd };
  Kind kind = Kind::Fp32;
  compress::RowwiseFormat rowwise{};   // bits 8/4/2, scale fp32/fp16
  std::size_t row_len = 512;           // rowwise: values per row (a weight matrix row, or a fixed run)
  compress::QsgdOptions qsgd{};
  bool error_comp = false;             // DQE at every hop (rowwise only)
  // With error_comp, whether the ring's first hop of a chunk (a rank's own
  // values, before any sum) is compensated too: true is sparq's default
  // ("+ec"), false Yang et al.'s Algorithm 2 ("+ec-skip-first"), whose first
  // hop sends DQ(T). Ring only: see quantized.h.
  bool ec_first_hop = true;

  // Bytes of `n` values on the wire.
  std::size_t bytes(std::size_t n) const;
  // x -> out (out.size() == bytes(x.size())). QSGD draws from (step, key).
  void encode(std::span<const float> x, std::span<std::byte> out, std::uint64_t step, std::uint64_t key) const;
  // Row-wise with error compensation, fused: out <- enc(x + err), err <- the
  // part of x + err the encoding leaves out (rowwise_quantize_ec).
  void encode_ec(std::span<const float> x, std::span<float> err, std::span<std::byte> out) const;
  // in -> out (in.size() must be bytes(out.size()); violations are WireError).
  void decode(std::span<const std::byte> in, std::span<float> out) const;
  std::string name() const;  // "fp32", "q4", "q2+ec", "q4+ec-skip-first", "qsgd4"
};

// "fp32", "q8", "q4", "q2" (row-wise), with "+ec" for error compensation on
// every hop or "+ec-skip-first" for it on every hop but a ring chunk's first,
// or "qsgd8|4|2". Throws InputError listing the valid spellings.
Codec parse_codec(std::string_view s);

}  // namespace sparq
