// qsgd_dequantize() of a peer's message. The first byte picks the bits
// (2/4/8), the bucket length and the value count (what fits, or one more).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "sparq/compress/qsgd.h"
#include "sparq/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sparq::compress;
  if (size == 0) return 0;
  const std::uint8_t pick = data[0];
  const std::span msg(reinterpret_cast<const std::byte*>(data + 1), size - 1);
  const int bits = (pick & 3) == 0 ? 2 : (pick & 3) == 1 ? 4 : 8;
  const QsgdOptions o{.bits = bits, .bucket = 1 + (pick >> 4) * 3u, .norm = pick & 4 ? QsgdNorm::Max : QsgdNorm::L2};
  const std::size_t n = msg.size() / qsgd_bytes(o.bucket, o) * o.bucket + (pick & 8 ? 1 : 0);
  std::vector<float> out(n);
  try {
    qsgd_dequantize(msg, o, out);
  } catch (const sparq::WireError&) {
  }
  return 0;
}
