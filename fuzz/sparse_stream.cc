// decode_stream() over arbitrary messages: every index coding (fixed 1/2/4
// bytes, delta-varint) and value format (f32, bf16, fp8, fp4) is picked by the
// message's own header. A stream that decodes must be usable (densified) and
// survive an f32 round trip unchanged. Only WireError may come out.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "sparq/compress/stream_codec.h"
#include "sparq/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sparq::compress;
  SparseStream s;
  try {
    s = decode_stream(std::span(reinterpret_cast<const std::byte*>(data), size));
  } catch (const sparq::WireError&) {
    return 0;
  }
  // A dense stream's values are in the message, so dim is bounded by size.
  if (s.dim() <= (1u << 20)) {
    std::vector<float> dense(s.dim());
    s.to_dense(dense);
  }
  std::vector<std::byte> again(encoded_size(s));
  encode_stream(s, again);
  const SparseStream t = decode_stream(again);
  if (t.dim() != s.dim() || t.nnz() != s.nnz() || t.is_dense() != s.is_dense()) std::abort();
  return 0;
}
