// The CPU codecs as they are, for the GPU kernels' tests (python/sparq/gpu/)
// to compare against bit for bit.
#include "python/bindings.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "python/array_views.h"
#include "sparq/compress/rowwise_quant.h"
#include "sparq/compress/stream_codec.h"
#include "sparq/compress/threshold_pack.h"
#include "sparq/compress/topk.h"

namespace sparq {

namespace py = pybind11;
using py_views::array_of;
using py_views::byte_span;
using py_views::float_span;

namespace {

compress::RowwiseFormat rowwise_format(int bits, const std::string& scale) {
  compress::check_code_bits(bits);
  SPARQ_CHECK_AS(InputError, scale == "f16" || scale == "f32", "row-wise: scale '{}'; it is f16 or f32", scale);
  return {bits, scale == "f16" ? compress::ScaleType::F16 : compress::ScaleType::F32};
}

// Row-wise q8/q4/q2 with fp16 or fp32 scale and bias, error-compensated or not.
void add_rowwise(py::module_& m) {
  m.def(
      "rowwise_quantize",
      [](py::array x, std::size_t cols, int bits, const std::string& scale, std::optional<py::array> err) {
        const compress::RowwiseFormat fmt = rowwise_format(bits, scale);
        std::span<const float> v = float_span(x, "rowwise_quantize: input", false);
        SPARQ_CHECK_AS(InputError, cols > 0 && v.size() % cols == 0, "rowwise_quantize: {} values are not rows of {}",
                       v.size(), cols);
        py::array_t<std::uint8_t> out(
            static_cast<py::ssize_t>(compress::RowwiseLayout{cols, fmt}.bytes(v.size() / cols)));
        std::span<std::byte> o = byte_span(out, "rowwise_quantize: output", true);
        if (err) {
          std::span<float> e = float_span(*err, "rowwise_quantize: residual");
          py::gil_scoped_release nogil;
          compress::rowwise_quantize_ec(v, e, cols, fmt, o);
        } else {
          py::gil_scoped_release nogil;
          compress::rowwise_quantize(v, cols, fmt, o);
        }
        return out;
      },
      py::arg("x"), py::arg("cols"), py::arg("bits"), py::arg("scale"), py::arg("err") = py::none(),
      "Row-wise q8/q4/q2 encoding of float32 rows of `cols` values (rowwise_quant.h); with `err`, error-compensated "
      "(err updated in place).");
  m.def(
      "rowwise_dequantize",
      [](py::array in, std::size_t cols, int bits, const std::string& scale, std::size_t rows) {
        const compress::RowwiseFormat fmt = rowwise_format(bits, scale);
        py::array_t<float> out(static_cast<py::ssize_t>(rows * cols));
        std::span<const std::byte> b = byte_span(in, "rowwise_dequantize: input", false);
        std::span<float> o(out.mutable_data(), rows * cols);
        py::gil_scoped_release nogil;
        compress::rowwise_dequantize(b, cols, fmt, o);
        return out;
      },
      py::arg("data"), py::arg("cols"), py::arg("bits"), py::arg("scale"), py::arg("rows"),
      "The float32 rows that rowwise_quantize's bytes decode to.");
}

// DCT-DP's and TopK's selection and the sparse streams they send.
void add_sparse(py::module_& m) {
  m.def(
      "threshold_pack",
      [](py::array x, float tau, std::optional<py::array> err) {
        std::span<const float> v = float_span(x, "threshold_pack: input", false);
        std::vector<std::uint32_t> idx(v.size());
        std::vector<float> val(v.size());
        std::size_t n = 0;
        if (err) {
          std::span<float> e = float_span(*err, "threshold_pack: residual");
          py::gil_scoped_release nogil;
          n = compress::feedback_threshold_pack(v, e, tau, idx, val);
        } else {
          py::gil_scoped_release nogil;
          n = compress::threshold_pack(v, tau, idx, val);
        }
        idx.resize(n), val.resize(n);
        return py::make_tuple(array_of<std::uint32_t>(idx), array_of<float>(val));
      },
      py::arg("x"), py::arg("tau"), py::arg("err") = py::none(),
      "The (index, value) pairs with |x| >= tau in index order; with `err`, DCT-DP's fused step on x + err (err "
      "updated in place).");
  m.def(
      "encode_stream",
      [](std::size_t dim, py::array idx, py::array val, const std::string& values) {
        auto i = py_views::span_of<const std::uint32_t>(idx, "encode_stream: indices", false, "uint32");
        std::span<const float> v = float_span(val, "encode_stream: values", false);
        const compress::ValueFormat vf = compress::value_format_named(values);
        auto s = compress::SparseStream::sparse(dim, {i.begin(), i.end()}, {v.begin(), v.end()});
        std::vector<std::uint8_t> out(compress::encoded_size(s, vf));
        compress::encode_stream(s, std::as_writable_bytes(std::span(out)), vf);
        return array_of<std::uint8_t>(out);
      },
      py::arg("dim"), py::arg("indices"), py::arg("values"), py::arg("format") = "f32",
      "The sparse stream of the pairs (uint32 indices ascending below dim, float32 values) on the wire, in "
      "the value format f32, bf16, fp8 or fp4: the CPU encoder's bytes.");
  m.def(
      "decode_stream",
      [](py::array data) {
        std::span<std::byte> b = byte_span(data, "decode_stream: input", false);
        const compress::SparseStream s = compress::decode_stream(b);
        return py::make_tuple(s.is_dense(), array_of<std::uint32_t>(s.indices()), array_of<float>(s.values()));
      },
      py::arg("data"),
      "(dense, indices, values) of a sparse stream's bytes, checked by the CPU decoder (WireError).");
  m.def(
      "sparsity_threshold",
      [](py::array x, double eta) {
        std::span<const float> v = float_span(x, "sparsity_threshold: input", false);
        std::vector<float> scratch;
        return compress::sparsity_threshold(v, eta, scratch);
      },
      py::arg("x"), py::arg("eta"), "DCT's threshold: element floor(n * eta) of |x| sorted ascending.");
  m.def(
      "bucket_topk",
      [](py::array x, std::size_t bucket, std::size_t k) {
        std::span<const float> v = float_span(x, "bucket_topk: input", false);
        std::vector<std::uint32_t> idx;
        std::vector<float> val;
        compress::bucket_topk(v, bucket, k, idx, val);
        return py::make_tuple(array_of<std::uint32_t>(idx), array_of<float>(val));
      },
      py::arg("x"), py::arg("bucket"), py::arg("k"),
      "SparCML's TopK: the k largest |x| of every run of `bucket` values (global indices ascending, values).");
}

}  // namespace

void add_codecs(py::module_& m) {
  add_rowwise(m);
  add_sparse(m);
}

}  // namespace sparq
