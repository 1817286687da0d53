// MPI's own allreduce (Open MPI's tuned component picks the algorithm), for
// comparison. Its traffic bypasses sparq's transport counters.
#include <mpi.h>

#include "sparq/coll/algorithms.h"
#include "sparq/transport/mpi_transport.h"

namespace sparq::algo {

namespace {
template <class T> MPI_Datatype mpi_type();
template <> MPI_Datatype mpi_type<float>() { return MPI_FLOAT; }
template <> MPI_Datatype mpi_type<double>() { return MPI_DOUBLE; }
template <> MPI_Datatype mpi_type<std::int32_t>() { return MPI_INT32_T; }
template <> MPI_Datatype mpi_type<std::int64_t>() { return MPI_INT64_T; }

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return MPI_SUM;
    case ReduceOp::Min: return MPI_MIN;
    case ReduceOp::Max: return MPI_MAX;
  }
  return MPI_OP_NULL;
}
}  // namespace

template <class T>
void native_allreduce(Transport& t, const T* in, T* out, std::size_t count, ReduceOp op) {
  auto* mpi = dynamic_cast<MpiTransport*>(&t);
  SPARQ_CHECK_AS(InputError, mpi != nullptr,
                 "allreduce algorithm 'native' needs the MPI transport (run under mpiexec), not '{}'", t.name());
  SPARQ_CHECK(count <= static_cast<std::size_t>(INT_MAX), "native allreduce of {} elements exceeds MPI's int count",
              count);
  const void* send = in == out ? MPI_IN_PLACE : static_cast<const void*>(in);
  mpi_check(MPI_Allreduce(send, out, static_cast<int>(count), mpi_type<T>(), mpi_op(op), mpi->comm()),
            "MPI_Allreduce");
}

#define X(T) template void native_allreduce<T>(Transport&, const T*, T*, std::size_t, ReduceOp);
SPARQ_FOR_EACH_DTYPE(X)
#undef X

}  // namespace sparq::algo
