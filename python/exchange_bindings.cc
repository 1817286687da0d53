// Data parallelism's gradient exchange for sparq.torch's hooks: every
// --dp-codec with the residuals it owns, and the pieces of the exchange for
// codecs that run elsewhere (a GPU): the sparse allreduce of a stream this
// rank encoded, the codec's per-tensor state, and the quantized ring's
// messages.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <optional>

#include "python/array_views.h"
#include "python/bindings.h"
#include "python/comm.h"
#include "sparq/coll/quantized.h"
#include "sparq/compress/stream_codec.h"
#include "sparq/train/grad_exchange.h"

namespace sparq {

namespace py = pybind11;
using py_views::byte_span;
using py_views::float_span;

namespace {

// The gradient exchange with the residuals it owns.
// comm may be null: an exchange whose payloads travel elsewhere (sparq.torch's
// group route) keeps its codec's state here and exchanges nothing itself.
struct PyGradExchange {
  PyGradExchange(Comm* c, const std::string& codec, const std::string& allreduce)
      : comm(c), x(parse_dp_codec(codec, allreduce), residuals) {}
  Transport& transport() const {
    SPARQ_CHECK_AS(InputError, comm, "GradExchange: made without a Comm, it keeps the codec's state and exchanges "
                   "nothing");
    return comm->transport();
  }
  Comm* comm;
  compress::ErrorFeedbackStore residuals;
  GradExchange x;
};

using Pieces = std::vector<std::pair<std::string, std::size_t>>;

py::dict exchange(PyGradExchange& g, const std::string& name, py::array grad, const Pieces& pieces,
                  std::uint64_t step) {
  Transport& t = g.transport();
  const auto what = fmt::format("bucket '{}' on rank {}", name, t.rank());
  std::span<float> s = float_span(grad, what);
  std::vector<GradExchange::Piece> ps;
  std::size_t total = 0;
  for (const auto& [n, k] : pieces) {
    ps.push_back({n, k});
    total += k;
  }
  SPARQ_CHECK_AS(InputError, ps.empty() || total == s.size(), "{}: the pieces hold {} values, the array {}", what,
                 total, s.size());
  ExchangeStats st;
  {
    py::gil_scoped_release nogil;
    try {
      st = ps.empty() ? g.x.exchange(t, name, s, step) : g.x.exchange(t, name, ps, s, step);
    } catch (...) {
      rethrow_with_prefix(what);
    }
  }
  py::dict d;
  d["bytes_sent"] = st.bytes_sent;
  d["dense_bytes"] = st.dense_bytes;
  d["kept"] = st.kept;
  d["values"] = st.values;
  d["compress_seconds"] = st.compress_seconds;
  d["comm_seconds"] = st.comm_seconds;
  return d;
}

py::tuple exchange_stream(PyGradExchange& g, const std::string& name, std::size_t dim, py::array data) {
  Transport& t = g.transport();
  const auto what = fmt::format("bucket '{}' on rank {}", name, t.rank());
  std::span<std::byte> in = byte_span(data, what + ", its stream", false);
  compress::SparseStream sum;
  std::vector<std::uint8_t> out;
  CollStats cs;
  {
    py::gil_scoped_release nogil;
    try {
      // Checked like a message, though this rank's own device wrote it.
      const compress::SparseStream sent = compress::decode_stream(in);
      SPARQ_CHECK_AS(InputError, sent.dim() == dim, "a stream of dimension {}, the bucket holds {}", sent.dim(), dim);
      cs = g.x.allreduce_pairs(t, name, sent, sum);
      out.resize(compress::encoded_size(sum));
      compress::encode_stream(sum, std::as_writable_bytes(std::span(out)));
    } catch (...) {
      rethrow_with_prefix(what);
    }
  }
  return py::make_tuple(py_views::array_of<std::uint8_t>(out), cs.wire.bytes_sent);
}

py::dict dp_codec_fields(const std::string& codec) {
  const DpCodec c = parse_dp_codec(codec);  // InputError naming what is wrong
  static constexpr const char* kinds[] = {"none", "dct", "topk", "quantized"};
  py::dict d;
  d["kind"] = kinds[static_cast<int>(c.kind)];
  d["eta"] = c.eta;
  d["life_span"] = c.life_span;
  d["k"] = c.k;
  d["bucket"] = c.bucket;
  d["values"] = std::string(compress::value_format_name(c.values));
  d["rowwise"] = c.kind == DpCodec::Kind::Quantized && c.codec.kind == Codec::Kind::Rowwise;
  d["bits"] = c.codec.rowwise.bits;
  d["f16_scale"] = c.codec.rowwise.scale == compress::ScaleType::F16;
  d["row_len"] = c.codec.row_len;
  d["error_comp"] = c.codec.error_comp;
  d["ec_first_hop"] = c.codec.ec_first_hop;
  return d;
}

void add_codec_state(py::class_<PyGradExchange>& c) {
  c.def(
       "tensor_state",
       [](const PyGradExchange& g, const std::string& name) {
         const GradExchange::TensorState s = g.x.tensor_state(name);
         return py::make_tuple(s.residual.empty() ? py::object(py::none()) : py_views::array_of(s.residual),
                               s.tau ? py::object(py::float_(*s.tau)) : py::object(py::none()));
       },
       py::arg("name"),
       "(residual, threshold) of one tensor: a copy of its residual (None if it has none) and DCT-DP's "
       "threshold (None before its first step), for codecs whose state lives elsewhere (a GPU).")
      .def(
          "set_tensor_state",
          [](PyGradExchange& g, const std::string& name, py::array residual, std::optional<float> tau) {
            g.x.set_tensor_state(name, float_span(residual, "tensor '" + name + "', residual", false), tau);
          },
          py::arg("name"), py::arg("residual"), py::arg("tau") = py::none(),
          "Replaces one tensor's residual (and DCT-DP's threshold), e.g. before state() when the codec ran on "
          "a GPU.")
      .def(
          "state",
          [](const PyGradExchange& g) {
            const auto blob = g.x.save_state();
            return py::bytes(reinterpret_cast<const char*>(blob.data()), blob.size());
          },
          "The codec's state on this rank (residuals, thresholds, plans), bit for bit.")
      .def(
          "load_state",
          [](PyGradExchange& g, const py::bytes& b) {
            const std::string_view v = b;
            g.x.load_state(std::as_bytes(std::span(v.data(), v.size())));
          },
          "Restores a state() of an exchange with the same codec.");
}

// The quantized ring's messages for a caller that encodes and decodes its
// chunks elsewhere (sparq.torch's quantized hook on a GPU): the layout, one
// hop, the allgather; the same messages as GradExchange's quantized ring, so
// ranks of both kinds mix.
QuantizedRingLayout ring_layout(const std::string& codec, std::size_t n, int p) {
  const DpCodec c = parse_dp_codec(codec, "ring");
  SPARQ_CHECK_AS(InputError, c.kind == DpCodec::Kind::Quantized && c.codec.kind == Codec::Kind::Rowwise,
                 "quantized ring: codec {} is not row-wise", codec);
  return QuantizedRingLayout(c.codec, n, p);
}

py::dict ring_layout_dict(const std::string& codec, std::size_t n, int p) {
  const QuantizedRingLayout l = ring_layout(codec, n, p);
  std::vector<std::size_t> values(static_cast<std::size_t>(p) + 1);
  for (int j = 0; j <= p; ++j) values[j] = j < p ? l.value(j) : n;
  py::dict d;
  d["values"] = values;
  d["bytes"] = l.bytes;
  return d;
}

void ring_hop(Comm& comm, const std::string& codec, std::size_t n, int send, py::array sent, int recv,
              py::array land) {
  Transport& t = comm.transport();
  const QuantizedRingLayout l = ring_layout(codec, n, t.size());
  const auto what = fmt::format("quantized ring hop on rank {}", t.rank());
  std::span<const std::byte> out = py_views::raw_bytes(sent, what + ", sent");
  std::span<std::byte> in = byte_span(land, what + ", landing", true);
  py::gil_scoped_release nogil;
  quantized_ring_hop(t, l, send, out, recv, in);
}

void ring_allgather(Comm& comm, const std::string& codec, std::size_t n, py::array wire) {
  Transport& t = comm.transport();
  const QuantizedRingLayout l = ring_layout(codec, n, t.size());
  std::span<std::byte> w = byte_span(wire, fmt::format("quantized ring allgather on rank {}", t.rank()), true);
  py::gil_scoped_release nogil;
  quantized_ring_allgather(t, l, w);
}

void allreduce_round(Comm& comm, std::vector<std::pair<int, py::array>> recvs,
                     std::vector<std::pair<int, py::array>> sends) {
  Transport& t = comm.transport();
  const auto what = fmt::format("quantized allreduce round on rank {}", t.rank());
  std::vector<QuantizedMessage> in, out;
  for (auto& [peer, a] : recvs) in.push_back({peer, byte_span(a, what + ", a receive", true)});
  for (auto& [peer, a] : sends) out.push_back({peer, byte_span(a, what + ", a send", false)});
  py::gil_scoped_release nogil;
  quantized_allreduce_round(t, in, out);
}

void add_quantized_ring(py::module_& m) {
  m.def("quantized_ring_layout", &ring_layout_dict, py::arg("codec"), py::arg("n"), py::arg("p"),
        "Chunk j of the quantized ring over p ranks (also recursive doubling's part j within one group): values "
        "[values[j], values[j+1]) of n, its encoding at bytes [bytes[j], bytes[j+1]) of the wire.");
  m.def("dense_ring_bytes", &dense_ring_bytes, py::arg("p"), py::arg("n"),
        "Bytes a rank sends in the fp32 ring allreduce of n values over p ranks: the baseline of a hook's "
        "dense_bytes.");
  m.def("quantized_ring_hop", &ring_hop, py::arg("comm"), py::arg("codec"), py::arg("n"), py::arg("send"),
        py::arg("sent"), py::arg("recv"), py::arg("land"),
        "One hop of the quantized ring: chunk `send`'s encoding `sent` to the right neighbour, chunk `recv`'s "
        "from the left one into `land` (-1: none); returns when both are done.");
  m.def("quantized_ring_allgather", &ring_allgather, py::arg("comm"), py::arg("codec"), py::arg("n"), py::arg("wire"),
        "The quantized ring's allgather of every chunk's encoding in `wire` (this rank's own chunk filled in).");
  m.def("quantized_allreduce_round", &allreduce_round, py::arg("comm"), py::arg("recvs"), py::arg("sends"),
        "One round of the quantized recursive doubling's messages ((peer, uint8 array) pairs): the receives "
        "posted in order, then the sends; returns when all are done.");
}

}  // namespace

void add_grad_exchange(py::module_& m) {
  py::class_<PyGradExchange> c(m, "GradExchange",
                               "Data-parallel exchange of dense gradients with a --dp-codec: the average over ranks.");
  c.def(py::init<Comm*, const std::string&, const std::string&>(), py::arg("comm"), py::arg("codec"),
        py::arg("allreduce") = "auto", py::keep_alive<1, 2>())
      .def("exchange", &exchange, py::arg("name"), py::arg("grad"), py::arg("pieces") = Pieces{}, py::arg("step"),
           "grad <- the average over ranks of what each sent. `pieces` ((name, size), ...) name the tensors "
           "of a bucket, so that dct and topk select per tensor. Every rank calls it in the same order.")
      .def("exchange_stream", &exchange_stream, py::arg("name"), py::arg("dim"), py::arg("stream"),
           "dct/topk with the pairs selected elsewhere (sparq.gpu's kernels): the sparse allreduce of this "
           "rank's sparse stream (uint8: the bucket `name` of `dim` values, its values already in the codec's "
           "format); returns (the sum's stream, f32 values; the bytes this rank sent).");
  add_codec_state(c);
  m.def("dp_codec", &dp_codec_fields, py::arg("codec"),
        "The fields of a --dp-codec (kind, eta, life_span, k, bucket, values; for the quantized ones rowwise, "
        "bits, f16_scale, row_len, error_comp, ec_first_hop).");
  add_quantized_ring(m);
}

}  // namespace sparq
