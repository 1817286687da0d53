// rowwise_dequantize() of a peer's message. The first byte picks the format
// (8/4/2 bits, f32 or f16 scales) and the row length; the output size is the
// message's row count, plus one row every other time (a size mismatch must be
// a WireError too).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "sparq/compress/rowwise_quant.h"
#include "sparq/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sparq::compress;
  if (size == 0) return 0;
  const std::uint8_t pick = data[0];
  const std::span msg(reinterpret_cast<const std::byte*>(data + 1), size - 1);
  const int bits = (pick & 3) == 0 ? 2 : (pick & 3) == 1 ? 4 : 8;
  const RowwiseFormat fmt{bits, pick & 4 ? ScaleType::F16 : ScaleType::F32};
  const std::size_t cols = 1 + (pick >> 4);
  const std::size_t rows = msg.size() / RowwiseLayout{cols, fmt}.row_bytes() + (pick & 8 ? 1 : 0);
  std::vector<float> out(rows * cols);
  try {
    rowwise_dequantize(msg, cols, fmt, out);
  } catch (const sparq::WireError&) {
  }
  return 0;
}
