// dct_mp_decode() of a DCT-MP activation message (per-row mask + values).
// The first byte picks the row length and how many values a row keeps.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "sparq/compress/dct_mp.h"
#include "sparq/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sparq::compress;
  if (size == 0) return 0;
  const std::uint8_t pick = data[0];
  const std::span msg(reinterpret_cast<const std::byte*>(data + 1), size - 1);
  const std::size_t cols = 1 + (pick & 31), keep = (pick >> 5) * cols / 7;
  const std::size_t rows = msg.size() / dct_mp_message_bytes(1, cols, keep);
  RowMask mask;
  std::vector<float> values(rows * keep);
  try {
    dct_mp_decode(msg, rows, cols, keep, mask, values);
  } catch (const sparq::WireError&) {
  }
  return 0;
}
