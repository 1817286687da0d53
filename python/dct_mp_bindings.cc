#include "python/bindings.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "python/array_views.h"
#include "sparq/compress/dct_mp.h"
#include "sparq/compress/topk.h"

namespace sparq {

namespace py = pybind11;
using compress::RowMask;
using py_views::byte_span;
using py_views::float_span;

namespace {

void check_eta(double eta) {
  SPARQ_CHECK_AS(InputError, eta >= 0 && eta < 1, "DCT-MP: sparsity eta {} outside [0, 1)", eta);
}

compress::ValueFormat value_format(const std::string& values) {
  SPARQ_CHECK_AS(InputError, values == "f32" || values == "bf16", "DCT-MP: values '{}'; they are f32 or bf16",
                 values);
  return values == "f32" ? compress::ValueFormat::F32 : compress::ValueFormat::Bf16;
}

std::size_t rows_of(std::size_t values, std::size_t cols, const char* what) {
  SPARQ_CHECK_AS(InputError, cols > 0 && values % cols == 0, "{}: {} values are not rows of {}", what, values, cols);
  return values / cols;
}

}  // namespace

void add_dct_mp(py::module_& m) {
  py::class_<RowMask>(m, "RowMask", "Which columns of each row a DCT-MP cut kept (its forward selection).")
      .def_property_readonly("rows", &RowMask::rows)
      .def_property_readonly("cols", &RowMask::cols)
      .def_property_readonly("keep", &RowMask::keep);

  m.def("dct_mp_kept", [](std::size_t cols, double eta) {
    check_eta(eta);
    return compress::kept_count(cols, eta);
  }, py::arg("cols"), py::arg("eta"), "Columns each row keeps: cols - floor(cols * eta).");
  m.def(
      "dct_mp_forward",
      [](py::array act, std::size_t cols, double eta, const std::string& values_format) {
        check_eta(eta);
        const compress::ValueFormat vf = value_format(values_format);
        std::span<const float> x = float_span(act, "DCT-MP forward: activations", false);
        const std::size_t rows = rows_of(x.size(), cols, "DCT-MP forward");
        py::array_t<std::uint8_t> msg(static_cast<py::ssize_t>(
            compress::dct_mp_message_bytes(rows, cols, compress::kept_count(cols, eta), vf)));
        std::span<std::byte> out(reinterpret_cast<std::byte*>(msg.mutable_data()), static_cast<std::size_t>(msg.size()));
        RowMask mask;
        {
          py::gil_scoped_release nogil;
          mask = compress::dct_mp_select(x, cols, eta);  // InputError on NaN
          std::vector<float> values(rows * mask.keep());
          compress::dct_mp_gather(mask, x, values);
          compress::dct_mp_encode(mask, values, out, vf);
        }
        return py::make_tuple(std::move(mask), msg);
      },
      py::arg("act"), py::arg("cols"), py::arg("eta"), py::arg("values") = "f32",
      "The per-row top-(1 - eta) selection of a row-major float32 array of `cols` columns, and the forward "
      "message in sparq's DCT-MP wire format, values in f32 or bf16: (RowMask, uint8 array).");
  m.def(
      "dct_mp_receive",
      [](py::array msg, std::size_t rows, std::size_t cols, std::size_t keep, py::array out,
         const std::string& values_format) {
        const compress::ValueFormat vf = value_format(values_format);
        std::span<const std::byte> in = byte_span(msg, "DCT-MP receive: message", false);
        std::span<float> dense = float_span(out, "DCT-MP receive: output");
        SPARQ_CHECK_AS(InputError, dense.size() == rows * cols, "DCT-MP receive: output of {} values for {}x{}",
                       dense.size(), rows, cols);
        RowMask mask;
        py::gil_scoped_release nogil;
        std::vector<float> values(rows * keep);
        compress::dct_mp_decode(in, rows, cols, keep, mask, values, vf);  // WireError on a bad message
        compress::dct_mp_scatter(mask, values, dense);
        return mask;
      },
      py::arg("message"), py::arg("rows"), py::arg("cols"), py::arg("keep"), py::arg("out"), py::arg("values") = "f32",
      "Validates a forward message of known shape and writes its dense rows (zeros where not kept) into `out`; "
      "returns its RowMask.");
  m.def(
      "dct_mp_gather",
      [](const RowMask& mask, py::array x, py::array packed) {
        std::span<const float> src = float_span(x, "DCT-MP gather: input", false);
        std::span<float> dst = float_span(packed, "DCT-MP gather: output");
        py::gil_scoped_release nogil;
        compress::dct_mp_gather(mask, src, dst);
      },
      py::arg("mask"), py::arg("x"), py::arg("packed"),
      "packed <- x at the mask's positions, row by row: the backward message (gradients, no mask).");
  m.def(
      "dct_mp_values_encode",
      [](py::array packed, const std::string& values_format) {
        const compress::ValueFormat vf = value_format(values_format);
        std::span<const float> v = float_span(packed, "DCT-MP values: input", false);
        py::array_t<std::uint8_t> out(static_cast<py::ssize_t>(compress::values_bytes(v.size(), vf)));
        std::span<std::byte> o(reinterpret_cast<std::byte*>(out.mutable_data()), static_cast<std::size_t>(out.size()));
        py::gil_scoped_release nogil;
        compress::dct_mp_encode_values(v, o, vf);
        return out;
      },
      py::arg("packed"), py::arg("values") = "f32", "The backward message: packed gradients in f32 or bf16.");
  m.def(
      "dct_mp_values_decode",
      [](py::array in, py::array packed, const std::string& values_format) {
        const compress::ValueFormat vf = value_format(values_format);
        std::span<const std::byte> b = byte_span(in, "DCT-MP values: message", false);
        std::span<float> v = float_span(packed, "DCT-MP values: output");
        py::gil_scoped_release nogil;
        compress::dct_mp_decode_values(b, v, vf);  // WireError on another size
      },
      py::arg("message"), py::arg("packed"), py::arg("values") = "f32",
      "Decodes a backward message into float32 `packed` (its size says how many values).");
  m.def(
      "dct_mp_scatter",
      [](const RowMask& mask, py::array packed, py::array dense) {
        std::span<const float> src = float_span(packed, "DCT-MP scatter: input", false);
        std::span<float> dst = float_span(dense, "DCT-MP scatter: output");
        py::gil_scoped_release nogil;
        compress::dct_mp_scatter(mask, src, dst);
      },
      py::arg("mask"), py::arg("packed"), py::arg("dense"), "dense <- packed at the mask's positions, zeros elsewhere.");
}

}  // namespace sparq
