// libFuzzer entry over every decoder that reads peer bytes. The first input
// byte picks the decoder and the shape; the rest is the message. A decoder
// may only return or throw WireError; anything else (a crash, a sanitizer
// report, another exception) is a finding.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "sparq/compress/dct_mp.h"
#include "sparq/compress/qsgd.h"
#include "sparq/compress/rowwise_quant.h"
#include "sparq/compress/stream_codec.h"
#include "sparq/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sparq::compress;
  if (size == 0) return 0;
  const std::uint8_t pick = data[0];
  const std::span<const std::byte> msg(reinterpret_cast<const std::byte*>(data + 1), size - 1);
  const int bits = 2 << (pick >> 6 & 1) << (pick >> 7);  // 2, 4 or 8 (one case twice)
  const std::size_t cols = 1 + (pick >> 2 & 15);
  try {
    switch (pick & 3) {
      case 0: {
        const SparseStream s = decode_stream(msg);
        // A decoded stream must be usable: densify it.
        std::vector<float> dense(s.dim() <= (1u << 20) ? s.dim() : 0);
        if (!dense.empty()) s.to_dense(dense);
        break;
      }
      case 1: {
        const RowwiseFormat fmt{bits, pick & 0x40 ? ScaleType::F16 : ScaleType::F32};
        const std::size_t rows = msg.size() / RowwiseLayout{cols, fmt}.row_bytes();
        std::vector<float> out(rows * cols);
        rowwise_dequantize(msg, cols, fmt, out);
        break;
      }
      case 2: {
        const QsgdOptions o{.bits = bits, .bucket = cols * 4};
        // Largest value count whose encoding fits: try it and its neighbours.
        const std::size_t per_bucket = qsgd_bytes(o.bucket, o);
        const std::size_t n = msg.size() / per_bucket * o.bucket + (pick & 8 ? 1 : 0);
        std::vector<float> out(n);
        qsgd_dequantize(msg, o, out);
        break;
      }
      default: {
        const std::size_t keep = cols / 2, rows = msg.size() / dct_mp_message_bytes(1, cols, keep);
        RowMask mask;
        std::vector<float> values(rows * keep);
        dct_mp_decode(msg, rows, cols, keep, mask, values);
        break;
      }
    }
  } catch (const sparq::WireError&) {
  }
  return 0;
}
