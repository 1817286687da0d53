#pragma once
// Open MPI processes as ranks.
//
// Thread level: we request MPI_THREAD_SERIALIZED. sparq never calls MPI from
// two threads at once: blocking collectives run on the calling thread, and the
// non-blocking ones run on one communication thread that owns the transport.
// SERIALIZED allows that thread to be other than main (FUNNELED would not),
// without paying MPI_THREAD_MULTIPLE's locking on every call.
#include <chrono>

#include <mpi.h>

#include "sparq/transport/transport.h"

namespace sparq {

// MPI_Init_thread / MPI_Finalize for the life of the object. One per process.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  // Kills every rank of the job (MPI_Abort) with `code`: used by the CLI when
  // this rank fails, so that the others do not wait for it. This rank ends
  // within kAbortGrace even if MPI_Abort does not return.
  [[noreturn]] static void abort_job(int code);
  static constexpr std::chrono::seconds kAbortGrace{10};

  // True when this process was started by mpiexec/mpirun (Open MPI or PMIx).
  static bool launched_by_mpiexec();

  // Before MPI_Init: Open MPI's TCP messages up to 4 MiB go eagerly, unless
  // the user set these parameters (OMPI_MCA_btl_tcp_eager_limit,
  // _rndv_eager_limit, _max_send_size; mpirun --mca sets the same). Above
  // its 64 KiB default a message waits for the receiver's go-ahead, and Open
  // MPI moves the rest only inside the sender's MPI calls: a pipeline stage
  // that sends its activations and goes on computing holds them back
  // (docs/results.md, "What real hosts paid that the clock did not charge").
  static void tune_tcp();
};

class MpiTransport final : public Transport {
 public:
  // Works on a duplicate of `comm` with errors returned, not fatal.
  explicit MpiTransport(MPI_Comm comm = MPI_COMM_WORLD);
  ~MpiTransport() override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view name() const override { return "mpi"; }
  MPI_Comm comm() const { return comm_; }

 protected:
  std::unique_ptr<RequestState> do_isend(int peer, int tag, Bytes data) override;
  std::unique_ptr<RequestState> do_irecv(int peer, int tag, MutBytes buf) override;
  std::unique_ptr<RequestState> do_irecv_message(int peer, int tag) override;

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

// Throws sparq::Error with MPI's own text when rc is not MPI_SUCCESS.
void mpi_check(int rc, const char* what);

}  // namespace sparq
