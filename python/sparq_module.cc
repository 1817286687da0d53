// sparq._sparq: the C++ side of the PyTorch bridge. It binds the transports
// (Gloo, connected through the job's torch.distributed store; MPI, when
// mpiexec started the job), the gradient
// exchange of data parallelism (every --dp-codec) and the quantized
// alltoallv. Arrays cross as numpy views of CPU tensors, never copied: an
// array that would need a copy (another dtype, not contiguous, read-only) is
// refused, because the result would land in the copy. Every collective runs
// with the GIL released; sparq's errors arrive as sparq.Error subclasses.
#include <gloo/rendezvous/store.h>
#include <pybind11/chrono.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>

#include "sparq/coll/broadcast.h"
#include "sparq/coll/quantized.h"
#include "sparq/compress/stream_codec.h"
#include "sparq/train/grad_exchange.h"
#include "sparq/transport/gloo_transport.h"
#include "sparq/transport/mpi_transport.h"
#include "python/array_views.h"
#include "python/comm.h"
#include "python/codec_bindings.h"
#include "python/dct_mp_bindings.h"

namespace py = pybind11;
using namespace sparq;
using namespace sparq::py_views;

namespace {

// Gloo's rendezvous store over a Python store (torch.distributed.Store or
// anything with its set/get/wait), called with the GIL held.
class PyStore final : public gloo::rendezvous::Store {
 public:
  explicit PyStore(py::object store) : store_(std::move(store)) {}
  ~PyStore() override {
    py::gil_scoped_acquire gil;
    store_ = py::object();
  }
  void set(const std::string& key, const std::vector<char>& data) override {
    py::gil_scoped_acquire gil;
    store_.attr("set")(key, py::bytes(data.data(), data.size()));
  }
  std::vector<char> get(const std::string& key) override {
    py::gil_scoped_acquire gil;
    const std::string v = store_.attr("get")(key).cast<std::string>();
    return {v.begin(), v.end()};
  }
  void wait(const std::vector<std::string>& keys) override {
    py::gil_scoped_acquire gil;
    store_.attr("wait")(keys);
  }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    py::gil_scoped_acquire gil;
    store_.attr("wait")(keys, timeout);
  }

 private:
  py::object store_;
};

// MPI for the bridge, initialized by the first MPI Comm. It asks for
// MPI_THREAD_MULTIPLE: the hook's thread and the caller's each drive a Comm of
// their own at the same time (sparq train funnels all of its MPI calls
// through one thread and asks for less). Finalized at interpreter exit if the
// bridge initialized it; a Comm still alive then frees nothing.
bool g_mpi_ours = false;

void bridge_mpi_init() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int level = 0;
  if (initialized) {
    MPI_Query_thread(&level);
  } else {
    mpi_check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &level), "MPI_Init_thread");
    g_mpi_ours = true;
  }
  SPARQ_CHECK_AS(InputError, level == MPI_THREAD_MULTIPLE,
                 "MPI runs at thread level {}; sparq's MPI transport in Python needs MPI_THREAD_MULTIPLE "
                 "({}): use transport='gloo'",
                 level, MPI_THREAD_MULTIPLE);
}

void bridge_mpi_finalize() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (g_mpi_ours && !finalized) MPI_Finalize();
}

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

void add_block_codec(py::module_& m) {
  m.def(
      "encoded_bytes", [](const std::string& codec, std::size_t row_len, std::size_t n) {
        return block_codec(codec, row_len).bytes(n);
      },
      py::arg("codec"), py::arg("row_len"), py::arg("n"), "Bytes of one encoded block of n values.");
  m.def(
      "encode",
      [](py::array in, py::array out, const std::string& codec, std::size_t row_len) {
        const Codec c = block_codec(codec, row_len);
        std::span<const float> x = float_span(in, "encode: input", false);
        std::span<std::byte> y = byte_span(out, "encode: output", true);
        SPARQ_CHECK_AS(InputError, y.size() == c.bytes(x.size()), "encode: {} values take {} bytes, the output has {}",
                       x.size(), c.bytes(x.size()), y.size());
        py::gil_scoped_release nogil;
        c.encode(x, y, 0, 0);
      },
      py::arg("input"), py::arg("output"), py::arg("codec"), py::arg("row_len"),
      "Encodes float32 values into uint8 `output`: the bytes quantized_alltoallv sends for that block.");
  m.def(
      "decode",
      [](py::array in, py::array out, const std::string& codec, std::size_t row_len) {
        const Codec c = block_codec(codec, row_len);
        std::span<const std::byte> x = byte_span(in, "decode: input", false);
        std::span<float> y = float_span(out, "decode: output");
        py::gil_scoped_release nogil;
        c.decode(x, y);  // WireError on a size or a scale that is not the codec's
      },
      py::arg("input"), py::arg("output"), py::arg("codec"), py::arg("row_len"),
      "Decodes what encode() wrote into float32 `output` (its size says how many values).");
}

py::dict counters_dict(const PeerCounters& c) {
  py::dict d;
  d["bytes_sent"] = c.bytes_sent;
  d["bytes_recv"] = c.bytes_recv;
  d["msgs_sent"] = c.msgs_sent;
  d["msgs_recv"] = c.msgs_recv;
  return d;
}

void check_peer_and_tag(const Transport& t, int peer, int tag, const char* what) {
  SPARQ_CHECK_AS(InputError, peer >= 0 && peer < t.size() && peer != t.rank(),
                 "{} on rank {}: peer {} is not another rank of {}", what, t.rank(), peer, t.size());
  SPARQ_CHECK_AS(InputError, tag >= 0 && tag <= Transport::kMaxTag, "{} on rank {}: tag {} outside 0..{}", what,
                 t.rank(), tag, Transport::kMaxTag);
}

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

void add_quantized_ring(py::module_& m) {
  m.def(
      "quantized_ring_layout",
      [](const std::string& codec, std::size_t n, int p) {
        const QuantizedRingLayout l = ring_layout(codec, n, p);
        std::vector<std::size_t> values(static_cast<std::size_t>(p) + 1);
        for (int j = 0; j <= p; ++j) values[j] = j < p ? l.value(j) : n;
        py::dict d;
        d["values"] = values;
        d["bytes"] = l.bytes;
        return d;
      },
      py::arg("codec"), py::arg("n"), py::arg("p"),
      "Chunk j of the quantized ring over p ranks (also recursive doubling's part j within one group): values "
      "[values[j], values[j+1]) of n, its encoding at bytes "
      "[bytes[j], bytes[j+1]) of the wire.");
  m.def("dense_ring_bytes", &dense_ring_bytes, py::arg("p"), py::arg("n"),
        "Bytes a rank sends in the fp32 ring allreduce of n values over p ranks: the baseline of a hook's "
        "dense_bytes.");
  m.def(
      "quantized_ring_hop",
      [](Comm& comm, const std::string& codec, std::size_t n, int send, py::array sent, int recv, py::array land) {
        Transport& t = comm.transport();
        const QuantizedRingLayout l = ring_layout(codec, n, t.size());
        const auto what = fmt::format("quantized ring hop on rank {}", t.rank());
        std::span<const std::byte> out = raw_bytes(sent, what + ", sent");
        std::span<std::byte> in = byte_span(land, what + ", landing", true);
        py::gil_scoped_release nogil;
        quantized_ring_hop(t, l, send, out, recv, in);
      },
      py::arg("comm"), py::arg("codec"), py::arg("n"), py::arg("send"), py::arg("sent"), py::arg("recv"),
      py::arg("land"),
      "One hop of the quantized ring: chunk `send`'s encoding `sent` to the right neighbour, chunk `recv`'s "
      "from the left one into `land` (-1: none); returns when both are done.");
  m.def(
      "quantized_ring_allgather",
      [](Comm& comm, const std::string& codec, std::size_t n, py::array wire) {
        Transport& t = comm.transport();
        const QuantizedRingLayout l = ring_layout(codec, n, t.size());
        std::span<std::byte> w = byte_span(wire, fmt::format("quantized ring allgather on rank {}", t.rank()), true);
        py::gil_scoped_release nogil;
        quantized_ring_allgather(t, l, w);
      },
      py::arg("comm"), py::arg("codec"), py::arg("n"), py::arg("wire"),
      "The quantized ring's allgather of every chunk's encoding in `wire` (this rank's own chunk filled in).");
  m.def(
      "quantized_allreduce_round",
      [](Comm& comm, std::vector<std::pair<int, py::array>> recvs, std::vector<std::pair<int, py::array>> sends) {
        Transport& t = comm.transport();
        const auto what = fmt::format("quantized allreduce round on rank {}", t.rank());
        std::vector<QuantizedMessage> in, out;
        for (auto& [peer, a] : recvs) in.push_back({peer, byte_span(a, what + ", a receive", true)});
        for (auto& [peer, a] : sends) out.push_back({peer, byte_span(a, what + ", a send", false)});
        py::gil_scoped_release nogil;
        quantized_allreduce_round(t, in, out);
      },
      py::arg("comm"), py::arg("recvs"), py::arg("sends"),
      "One round of the quantized recursive doubling's messages ((peer, uint8 array) pairs): the receives "
      "posted in order, then the sends; returns when all are done.");
}

}  // namespace

PYBIND11_MODULE(_sparq, m) {
  m.doc() = "sparq's compressed collectives (C++), for sparq.torch";

  static py::exception<Error> error(m, "Error", PyExc_RuntimeError);
  static py::exception<InputError> input_error(m, "InputError", error.ptr());
  static py::exception<TimeoutError> timeout_error(m, "TimeoutError", error.ptr());
  static py::exception<WireError> wire_error(m, "WireError", error.ptr());
  static py::exception<AbortedError> aborted_error(m, "AbortedError", error.ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const InputError& e) {
      input_error(e.what());
    } catch (const TimeoutError& e) {
      timeout_error(e.what());
    } catch (const WireError& e) {
      wire_error(e.what());
    } catch (const AbortedError& e) {
      aborted_error(e.what());
    } catch (const Error& e) {
      error(e.what());
    }
  });

  py::class_<Comm>(m, "Comm", "A group of ranks sparq's collectives run on.")
      .def_static(
          "gloo",
          [](py::object store, int rank, int size, const std::string& iface, const std::string& hostname,
             std::chrono::milliseconds timeout) {
            auto c = std::make_unique<Comm>();
            PyStore s(std::move(store));
            py::gil_scoped_release nogil;
            c->t = std::make_unique<GlooTransport>(s, rank, size, GlooAddress{iface, hostname}, timeout);
            return c;
          },
          py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("iface") = "", py::arg("hostname") = "",
          py::arg("timeout") = std::chrono::milliseconds(Transport::kDefaultTimeout),
          "Connects `size` ranks over Gloo's TCP transport; the ranks meet through `store` "
          "(a torch.distributed.Store, e.g. a PrefixStore of the default group's).")
      .def_static(
          "mpi",
          [](int rank, int size, std::chrono::milliseconds timeout) {
            SPARQ_CHECK_AS(InputError, MpiSession::launched_by_mpiexec(),
                           "sparq's MPI transport needs a job started by mpiexec (use transport='gloo')");
            auto c = std::make_unique<Comm>();
            py::gil_scoped_release nogil;
            bridge_mpi_init();
            int world = 0;
            MPI_Comm_size(MPI_COMM_WORLD, &world);
            SPARQ_CHECK_AS(InputError, world == size && rank >= 0 && rank < size,
                           "rank {} of {} in torch.distributed, but mpiexec started {} processes: the MPI "
                           "transport needs them to be the same ranks (use transport='gloo')",
                           rank, size, world);
            // Numbered as torch.distributed numbers them, whatever MPI's order.
            MPI_Comm by_torch_rank = MPI_COMM_NULL;
            mpi_check(MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &by_torch_rank), "MPI_Comm_split");
            auto t = std::make_unique<MpiTransport>(by_torch_rank);
            MPI_Comm_free(&by_torch_rank);
            t->set_timeout(timeout);
            c->t = std::move(t);
            return c;
          },
          py::arg("rank"), py::arg("size"), py::arg("timeout") = std::chrono::milliseconds(Transport::kDefaultTimeout),
          "Connects the `size` processes mpiexec started over MPI, numbered by `rank` (torch.distributed's). "
          "Collective over every process of the job.")
      .def_property_readonly("transport_name", [](Comm& c) { return std::string(c.transport().name()); })
      .def_property_readonly("rank", [](Comm& c) { return c.transport().rank(); })
      .def_property_readonly("size", [](Comm& c) { return c.transport().size(); })
      .def_property_readonly("timeout", [](Comm& c) { return c.transport().timeout(); })
      .def(
          "counters",
          [](Comm& c) {
            const TrafficCounters tc = c.transport().counters();
            py::dict d = counters_dict(tc.total());
            py::list per_peer;
            for (const auto& p : tc.per_peer) per_peer.append(counters_dict(p));
            d["per_peer"] = per_peer;
            return d;
          },
          "Bytes and messages this rank sent and received (payloads), in total and per peer.")
      .def(
          "barrier",
          [](Comm& c) {
            Transport& t = c.transport();
            py::gil_scoped_release nogil;
            barrier(t);
          },
          "Returns once every rank has called it.")
      .def(
          "send",
          [](Comm& c, int peer, int tag, py::array data) {
            Transport& t = c.transport();
            check_peer_and_tag(t, peer, tag, "send");
            std::span<const std::byte> b = raw_bytes(data, fmt::format("send to rank {}", peer));
            py::gil_scoped_release nogil;
            t.send(peer, tag, b);
          },
          py::arg("peer"), py::arg("tag"), py::arg("data"),
          "Sends the bytes of a contiguous array to `peer`; returns once the array may be reused.")
      .def(
          "recv_message",
          [](Comm& c, int peer, int tag) {
            Transport& t = c.transport();
            check_peer_and_tag(t, peer, tag, "recv_message");
            std::vector<std::byte> m;
            {
              py::gil_scoped_release nogil;
              m = t.recv_message(peer, tag);
            }
            py::array_t<std::uint8_t> a(static_cast<py::ssize_t>(m.size()));
            if (!m.empty()) std::memcpy(a.mutable_data(), m.data(), m.size());
            return a;
          },
          py::arg("peer"), py::arg("tag"), "Receives a message of any size from `peer`, as a uint8 array.")
      .def(
          "close", [](Comm& c) { c.close(); },
          "Closes the Comm. On Gloo it says goodbye to every rank and waits for theirs (as MPI_Finalize "
          "does), up to the timeout; on MPI it frees the communicator.");

  py::class_<PyGradExchange>(m, "GradExchange",
                             "Data-parallel exchange of dense gradients with a --dp-codec: the average over ranks.")
      .def(py::init<Comm*, const std::string&, const std::string&>(), py::arg("comm"), py::arg("codec"),
           py::arg("allreduce") = "auto", py::keep_alive<1, 2>())
      .def(
          "exchange",
          [](PyGradExchange& g, const std::string& name, py::array grad,
             const std::vector<std::pair<std::string, std::size_t>>& pieces, std::uint64_t step) {
            Transport& t = g.transport();
            const auto what = fmt::format("bucket '{}' on rank {}", name, t.rank());
            std::span<float> s = float_span(grad, what);
            std::vector<GradExchange::Piece> ps;
            std::size_t total = 0;
            for (const auto& [n, k] : pieces) {
              ps.push_back({n, k});
              total += k;
            }
            SPARQ_CHECK_AS(InputError, ps.empty() || total == s.size(), "{}: the pieces hold {} values, the array {}",
                           what, total, s.size());
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
          },
          py::arg("name"), py::arg("grad"), py::arg("pieces") = std::vector<std::pair<std::string, std::size_t>>{},
          py::arg("step"),
          "grad <- the average over ranks of what each sent. `pieces` ((name, size), ...) name the tensors "
          "of a bucket, so that dct and topk select per tensor. Every rank calls it in the same order.")
      .def(
          "exchange_stream",
          [](PyGradExchange& g, const std::string& name, std::size_t dim, py::array data) {
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
                SPARQ_CHECK_AS(InputError, sent.dim() == dim, "a stream of dimension {}, the bucket holds {}",
                               sent.dim(), dim);
                cs = g.x.allreduce_pairs(t, name, sent, sum);
                out.resize(compress::encoded_size(sum));
                compress::encode_stream(sum, std::as_writable_bytes(std::span(out)));
              } catch (...) {
                rethrow_with_prefix(what);
              }
            }
            return py::make_tuple(py_views::array_of<std::uint8_t>(out), cs.wire.bytes_sent);
          },
          py::arg("name"), py::arg("dim"), py::arg("stream"),
          "dct/topk with the pairs selected elsewhere (sparq.gpu's kernels): the sparse allreduce of this "
          "rank's sparse stream (uint8: the bucket `name` of `dim` values, its values already in the codec's "
          "format); returns (the sum's stream, f32 values; the bytes this rank sent).")
      .def(
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

  m.def(
      "dp_codec",
      [](const std::string& codec) {
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
      },
      py::arg("codec"),
      "The fields of a --dp-codec (kind, eta, life_span, k, bucket, values; for the quantized ones rowwise, "
      "bits, f16_scale, row_len, error_comp, ec_first_hop).");
  add_quantized_ring(m);
  add_block_codec(m);
  add_dct_mp(m);
  add_codecs(m);
  m.def("launched_by_mpiexec", &MpiSession::launched_by_mpiexec, "True when mpiexec started this process.");
  m.def(
      "mpi_abort",
      [](int code) {
        int initialized = 0, finalized = 0;
        MPI_Initialized(&initialized);
        MPI_Finalized(&finalized);
        if (initialized && !finalized) MpiSession::abort_job(code);
      },
      py::arg("code"), "MPI_Abort on every rank of the job, if MPI is running here; else returns.");
  m.def(
      "mpi_finalize",
      [] {
        py::gil_scoped_release nogil;
        bridge_mpi_finalize();
      },
      "Finalizes MPI if an MPI Comm initialized it (sparq.torch calls it at exit).");

  m.def(
      "quantized_alltoallv",
      [](Comm& c, py::array in, const std::vector<std::size_t>& send_counts, py::array out,
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
      },
      py::arg("comm"), py::arg("input"), py::arg("send_counts"), py::arg("output"), py::arg("recv_counts"),
      py::arg("codec"), py::arg("row_len"), py::arg("step") = 0,
      "Alltoallv of float32 values: send_counts[j] to rank j, recv_counts[i] from rank i, every block for "
      "another rank encoded by `codec` (fp32, q8, q4, q2) in rows of row_len values, each with an fp16 scale "
      "and bias, or by qsgd8|4|2, whose random rounding is keyed by `step` (pass the training step: the same "
      "step draws the same rounding).");
}
