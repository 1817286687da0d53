// sparq.Comm: the transports for the bridge. Gloo connects through the job's
// torch.distributed store; MPI when mpiexec started the job, numbered as
// torch.distributed numbers the ranks.
#include <gloo/rendezvous/store.h>
#include <pybind11/chrono.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "python/array_views.h"
#include "python/bindings.h"
#include "python/comm.h"
#include "sparq/coll/broadcast.h"
#include "sparq/transport/gloo_transport.h"
#include "sparq/transport/mpi_transport.h"

namespace sparq {

namespace py = pybind11;
using py_views::raw_bytes;

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
    MpiSession::tune_tcp();
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

std::mutex g_closing_mu;
std::vector<std::thread> g_closing;  // Comms closing in the background
bool g_exiting = false;              // the interpreter is exiting: close in place

void join_closing() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lk(g_closing_mu);
    g_exiting = true;
    threads.swap(g_closing);
  }
  py::gil_scoped_release nogil;
  for (std::thread& th : threads) th.join();
}

std::unique_ptr<Comm> connect_gloo(py::object store, int rank, int size, const std::string& iface,
                                   const std::string& hostname, std::chrono::milliseconds timeout) {
  auto c = std::make_unique<Comm>();
  PyStore s(std::move(store));
  py::gil_scoped_release nogil;
  c->t = std::make_unique<GlooTransport>(s, rank, size, GlooAddress{iface, hostname}, timeout);
  c->close_when_freed_in_background = true;
  return c;
}

std::unique_ptr<Comm> connect_mpi(int rank, int size, std::chrono::milliseconds timeout) {
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
}

py::dict all_counters(Comm& c) {
  const TrafficCounters tc = c.transport().counters();
  py::dict d = counters_dict(tc.total());
  py::list per_peer;
  for (const auto& p : tc.per_peer) per_peer.append(counters_dict(p));
  d["per_peer"] = per_peer;
  return d;
}

void check_peer_and_tag(const Transport& t, int peer, int tag, const char* what) {
  SPARQ_CHECK_AS(InputError, peer >= 0 && peer < t.size() && peer != t.rank(),
                 "{} on rank {}: peer {} is not another rank of {}", what, t.rank(), peer, t.size());
  SPARQ_CHECK_AS(InputError, tag >= 0 && tag <= Transport::kMaxTag, "{} on rank {}: tag {} outside 0..{}", what,
                 t.rank(), tag, Transport::kMaxTag);
}

void send(Comm& c, int peer, int tag, py::array data) {
  Transport& t = c.transport();
  check_peer_and_tag(t, peer, tag, "send");
  std::span<const std::byte> b = raw_bytes(data, fmt::format("send to rank {}", peer));
  py::gil_scoped_release nogil;
  t.send(peer, tag, b);
}

py::array_t<std::uint8_t> recv_message(Comm& c, int peer, int tag) {
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
}

void add_mpi_job(py::module_& m) {
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
}

}  // namespace

void close_in_background(std::unique_ptr<Transport> t) {
  std::lock_guard lk(g_closing_mu);
  if (g_exiting) {
    py::gil_scoped_release nogil;
    t.reset();
    return;
  }
  g_closing.emplace_back([gone = std::shared_ptr<Transport>(std::move(t))]() mutable { gone.reset(); });
}

py::dict counters_dict(const PeerCounters& c) {
  py::dict d;
  d["bytes_sent"] = c.bytes_sent;
  d["bytes_recv"] = c.bytes_recv;
  d["msgs_sent"] = c.msgs_sent;
  d["msgs_recv"] = c.msgs_recv;
  return d;
}

void add_comm(py::module_& m) {
  py::module_::import("atexit").attr("register")(py::cpp_function(&join_closing));
  const auto default_timeout = std::chrono::milliseconds(Transport::kDefaultTimeout);
  py::class_<Comm>(m, "Comm", "A group of ranks sparq's collectives run on.")
      .def_static("gloo", &connect_gloo, py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("iface") = "",
                  py::arg("hostname") = "", py::arg("timeout") = default_timeout,
                  "Connects `size` ranks over Gloo's TCP transport; the ranks meet through `store` "
                  "(a torch.distributed.Store, e.g. a PrefixStore of the default group's).")
      .def_static("mpi", &connect_mpi, py::arg("rank"), py::arg("size"), py::arg("timeout") = default_timeout,
                  "Connects the `size` processes mpiexec started over MPI, numbered by `rank` (torch.distributed's). "
                  "Collective over every process of the job.")
      .def_property_readonly("transport_name", [](Comm& c) { return std::string(c.transport().name()); })
      .def_property_readonly("rank", [](Comm& c) { return c.transport().rank(); })
      .def_property_readonly("size", [](Comm& c) { return c.transport().size(); })
      .def_property_readonly("timeout", [](Comm& c) { return c.transport().timeout(); })
      .def("counters", &all_counters,
           "Bytes and messages this rank sent and received (payloads), in total and per peer.")
      .def(
          "barrier",
          [](Comm& c) {
            Transport& t = c.transport();
            py::gil_scoped_release nogil;
            barrier(t);
          },
          "Returns once every rank has called it.")
      .def("send", &send, py::arg("peer"), py::arg("tag"), py::arg("data"),
           "Sends the bytes of a contiguous array to `peer`; returns once the array may be reused.")
      .def("recv_message", &recv_message, py::arg("peer"), py::arg("tag"),
           "Receives a message of any size from `peer`, as a uint8 array.")
      .def(
          "close", [](Comm& c) { c.close(); },
          "Closes the Comm. On Gloo it says goodbye to every rank and waits for theirs (as MPI_Finalize "
          "does), up to the timeout; on MPI it frees the communicator.");
  add_mpi_job(m);
}

}  // namespace sparq
