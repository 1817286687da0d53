// The alltoalls of table-wise embeddings for sparq.torch: the quantized
// alltoallv (sparq train's wire format), its blocks' codec for ranks that
// encode on their own, and the alltoallv of blocks a GPU rank encoded.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "python/array_views.h"
#include "python/bindings.h"
#include "python/comm.h"
#include "sparq/coll/alltoall.h"
#include "sparq/coll/quantized.h"

namespace sparq {

namespace py = pybind11;
using py_views::byte_span;
using py_views::float_span;

namespace {

// One block of quantized_alltoallv's wire format: fp32, or rows of row_len
// values (the last row shorter), each q8/q4/q2 with an fp16 scale and bias.
Codec block_codec(const std::string& codec, std::size_t row_len) {
  SPARQ_CHECK_AS(InputError, codec == "fp32" || codec == "q8" || codec == "q4" || codec == "q2",
                 "codec '{}': sparq's alltoall codecs are fp32, q8, q4 and q2", codec);
  SPARQ_CHECK_AS(InputError, row_len > 0, "codec {}: row_len must be positive", codec);
  Codec c = parse_codec(codec);
  c.row_len = row_len;
  c.rowwise.scale = compress::ScaleType::F16;  // as sparq train's table-wise alltoalls
  return c;
}

void encode_block(py::array in, py::array out, const std::string& codec, std::size_t row_len) {
  const Codec c = block_codec(codec, row_len);
  std::span<const float> x = float_span(in, "encode: input", false);
  std::span<std::byte> y = byte_span(out, "encode: output", true);
  SPARQ_CHECK_AS(InputError, y.size() == c.bytes(x.size()), "encode: {} values take {} bytes, the output has {}",
                 x.size(), c.bytes(x.size()), y.size());
  py::gil_scoped_release nogil;
  c.encode(x, y, 0, 0);
}

void decode_block(py::array in, py::array out, const std::string& codec, std::size_t row_len) {
  const Codec c = block_codec(codec, row_len);
  std::span<const std::byte> x = byte_span(in, "decode: input", false);
  std::span<float> y = float_span(out, "decode: output");
  py::gil_scoped_release nogil;
  c.decode(x, y);  // WireError on a size or a scale that is not the codec's
}

py::dict alltoallv_floats(Comm& c, py::array in, const std::vector<std::size_t>& send_counts, py::array out,
                          const std::vector<std::size_t>& recv_counts, const std::string& codec, std::size_t row_len,
                          std::uint64_t step) {
  Transport& t = c.transport();
  const auto what = fmt::format("quantized alltoallv on rank {}", t.rank());
  std::span<const float> src = float_span(in, what + ", input", false);
  std::span<float> dst = float_span(out, what + ", output");
  SPARQ_CHECK_AS(InputError, row_len > 0, "{}: row_len must be positive", what);
  QuantizedAlltoallOptions o;
  o.codec = parse_codec(codec);
  o.codec.row_len = row_len;
  o.codec.rowwise.scale = compress::ScaleType::F16;  // as sparq train's table-wise alltoalls
  o.step = step;
  CollStats st;
  {
    py::gil_scoped_release nogil;
    st = quantized_alltoallv(t, src, send_counts, dst, recv_counts, o);
  }
  return counters_dict(st.wire);
}

py::dict alltoallv_bytes(Comm& c, py::array in, const std::vector<std::size_t>& send_counts, py::array out,
                         const std::vector<std::size_t>& recv_counts) {
  Transport& t = c.transport();
  const auto what = fmt::format("alltoallv_bytes on rank {}", t.rank());
  std::span<std::byte> src = byte_span(in, what + ", input", false);
  std::span<std::byte> dst = byte_span(out, what + ", output", true);
  AlltoallOptions o;
  o.tag = tags::kQuantizedAlltoall;  // quantized_alltoallv's messages: the two kinds of ranks mix
  CollStats st;
  {
    py::gil_scoped_release nogil;
    st = alltoallv(t, src, send_counts, dst, recv_counts, o);
  }
  py::dict d;
  d["bytes_sent"] = st.wire.bytes_sent;
  return d;
}

}  // namespace

void add_alltoall(py::module_& m) {
  m.def(
      "encoded_bytes", [](const std::string& codec, std::size_t row_len, std::size_t n) {
        return block_codec(codec, row_len).bytes(n);
      },
      py::arg("codec"), py::arg("row_len"), py::arg("n"), "Bytes of one encoded block of n values.");
  m.def("encode", &encode_block, py::arg("input"), py::arg("output"), py::arg("codec"), py::arg("row_len"),
        "Encodes float32 values into uint8 `output`: the bytes quantized_alltoallv sends for that block.");
  m.def("decode", &decode_block, py::arg("input"), py::arg("output"), py::arg("codec"), py::arg("row_len"),
        "Decodes what encode() wrote into float32 `output` (its size says how many values).");
  m.def("quantized_alltoallv", &alltoallv_floats, py::arg("comm"), py::arg("input"), py::arg("send_counts"),
        py::arg("output"), py::arg("recv_counts"), py::arg("codec"), py::arg("row_len"), py::arg("step") = 0,
        "Alltoallv of float32 values: send_counts[j] to rank j, recv_counts[i] from rank i, every block for "
        "another rank encoded by `codec` (fp32, q8, q4, q2) in rows of row_len values, each with an fp16 scale "
        "and bias, or by qsgd8|4|2, whose random rounding is keyed by `step` (pass the training step: the same "
        "step draws the same rounding).");
  m.def("alltoallv_bytes", &alltoallv_bytes, py::arg("comm"), py::arg("input"), py::arg("send_counts"),
        py::arg("output"), py::arg("recv_counts"),
        "Alltoallv of bytes already encoded (a GPU rank's q8/q4/q2 blocks): send_counts[j] bytes to rank j, "
        "recv_counts[i] from rank i, as the messages of quantized_alltoallv, so ranks that encode their own "
        "blocks exchange with ranks that call it.");
}

}  // namespace sparq
