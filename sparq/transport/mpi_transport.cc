#include "sparq/transport/mpi_transport.h"

#include <climits>
#include <cstdlib>
#include <thread>

namespace sparq {

void mpi_check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  int cls = 0;
  MPI_Error_class(rc, &cls);
  if (cls == MPI_ERR_TRUNCATE) SPARQ_THROW(WireError, "{}: {}", what, std::string(text, len));
  SPARQ_THROW(Error, "{}: {}", what, std::string(text, len));
}

void MpiSession::tune_tcp() {
  constexpr const char* kLimit = "4194304";
  for (const char* name : {"OMPI_MCA_btl_tcp_eager_limit", "OMPI_MCA_btl_tcp_rndv_eager_limit",
                           "OMPI_MCA_btl_tcp_max_send_size"})
    setenv(name, kLimit, /*overwrite=*/0);
}

MpiSession::MpiSession(int* argc, char*** argv) {
  tune_tcp();
  int initialized = 0;
  MPI_Initialized(&initialized);
  SPARQ_CHECK(!initialized, "MPI initialized twice");
  int provided = 0;
  mpi_check(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
  SPARQ_CHECK(provided >= MPI_THREAD_SERIALIZED, "MPI provides thread level {}, sparq needs MPI_THREAD_SERIALIZED",
              provided);
}

MpiSession::~MpiSession() { MPI_Finalize(); }

void MpiSession::abort_job(int code) {
  // MPI_Abort asks the launcher to kill the job; where the launcher cannot
  // reach this host (its network cut) it may never come back. The rank ends
  // itself after a grace period all the same, so nothing of the job is left.
  std::thread([code] {
    std::this_thread::sleep_for(kAbortGrace);
    std::_Exit(code);
  }).detach();
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; this is for the compiler
}

bool MpiSession::launched_by_mpiexec() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

namespace {

int checked_count(std::size_t n) {
  // MPI counts are int; collectives segment large buffers well below this.
  SPARQ_CHECK(n <= static_cast<std::size_t>(INT_MAX), "message of {} bytes exceeds MPI's int count limit", n);
  return static_cast<int>(n);
}

// Polls MPI_Test (which drives Open MPI's progress engine) until done or the
// deadline: spinning for the first 5 ms, then sleeping 50 us after every
// poll. A long wait (an idle pipeline stage, a slower peer) would otherwise
// take a whole core from the ranks that compute: with 4 ranks on 2 cores
// the hybrid plan's step got 2-9% faster, and sleeping after every poll
// rather than every 64th took the CPU an idle wait burns from about two
// thirds of a core to a few percent. But a message that arrives during a
// sleep waits for the sleeper's wake-up (timer slack and a turn on a busy
// core, not 50 us), and a ring's every step waits for one: with a 100 us
// spin an unfused q4 ring plan took 5-7 ms a step more on the 4-host
// cluster than with 5 ms, and no plan measured gained from the shorter
// spin (docs/results.md, "What real hosts paid that the clock did not charge").
template <class TestFn>
bool poll_until(Clock::time_point deadline, TestFn&& test) {
  using namespace std::chrono_literals;
  const auto spin_until = Clock::now() + 5ms;
  for (;;) {
    if (test()) return true;
    const auto now = Clock::now();
    if (now >= deadline) return test();
    if (now >= spin_until) std::this_thread::sleep_for(50us);
  }
}

struct MpiRequestState : RequestState {
  MPI_Request req = MPI_REQUEST_NULL;
  std::size_t expected = 0;  // exact size a fixed-size receive requires
  std::size_t got = 0;
  bool is_recv = false;
  bool done = false;

  ~MpiRequestState() override {
    if (req != MPI_REQUEST_NULL) {
      if (is_recv) MPI_Cancel(&req);
      MPI_Request_free(&req);
    }
  }

  bool test() override {
    if (done) return true;
    int flag = 0;
    MPI_Status st;
    mpi_check(MPI_Test(&req, &flag, &st), is_recv ? "MPI_Test(recv)" : "MPI_Test(send)");
    if (!flag) return false;
    finish(st);
    return true;
  }

  void finish(const MPI_Status& st) {
    done = true;
    if (!is_recv) {
      got = expected;
      return;
    }
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    got = static_cast<std::size_t>(count);
    if (got != expected)
      SPARQ_THROW(WireError, "message of {} bytes from rank {} (tag {}) where {} were expected", got,
                  st.MPI_SOURCE, st.MPI_TAG, expected);
  }

  bool wait_until(Clock::time_point deadline) override {
    return poll_until(deadline, [&] { return test(); });
  }
  std::size_t bytes() const override { return got; }
};

// A receive of unknown size: matched-probe first, then receive exactly that.
struct MpiMessageState final : MpiRequestState {
  MPI_Comm comm;
  int peer, tag;
  bool matched = false;
  std::vector<std::byte> buf;

  MpiMessageState(MPI_Comm c, int p, int t) : comm(c), peer(p), tag(t) { is_recv = true; }

  bool test() override {
    if (!matched) {
      int flag = 0;
      MPI_Message msg;
      MPI_Status st;
      mpi_check(MPI_Improbe(peer, tag, comm, &flag, &msg, &st), "MPI_Improbe");
      if (!flag) return false;
      int count = 0;
      MPI_Get_count(&st, MPI_BYTE, &count);
      buf.resize(static_cast<std::size_t>(count));
      expected = buf.size();
      mpi_check(MPI_Imrecv(buf.data(), count, MPI_BYTE, &msg, &req), "MPI_Imrecv");
      matched = true;
    }
    return MpiRequestState::test();
  }
  std::vector<std::byte> take_message() override { return std::move(buf); }
};

}  // namespace

MpiTransport::MpiTransport(MPI_Comm comm) {
  mpi_check(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  init_counters(size_);
}

MpiTransport::~MpiTransport() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

std::unique_ptr<RequestState> MpiTransport::do_isend(int peer, int tag, Bytes data) {
  auto s = std::make_unique<MpiRequestState>();
  s->expected = data.size();
  mpi_check(MPI_Isend(data.data(), checked_count(data.size()), MPI_BYTE, peer, tag, comm_, &s->req), "MPI_Isend");
  return s;
}

std::unique_ptr<RequestState> MpiTransport::do_irecv(int peer, int tag, MutBytes buf) {
  auto s = std::make_unique<MpiRequestState>();
  s->is_recv = true;
  s->expected = buf.size();
  mpi_check(MPI_Irecv(buf.data(), checked_count(buf.size()), MPI_BYTE, peer, tag, comm_, &s->req), "MPI_Irecv");
  return s;
}

std::unique_ptr<RequestState> MpiTransport::do_irecv_message(int peer, int tag) {
  return std::make_unique<MpiMessageState>(comm_, peer, tag);
}

}  // namespace sparq
