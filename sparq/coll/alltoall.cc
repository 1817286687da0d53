#include "sparq/coll/alltoall.h"

#include <climits>
#include <cstring>
#include <vector>

#include "sparq/coll/algorithms.h"
#include "sparq/coll/patterns.h"
#include "sparq/transport/mpi_transport.h"

namespace sparq {

std::string_view alltoall_algo_name(AlltoallAlgo a) { return a == AlltoallAlgo::Native ? "native" : "pairwise"; }

AlltoallAlgo parse_alltoall_algo(std::string_view s) {
  if (s == "pairwise" || s == "auto") return AlltoallAlgo::Pairwise;
  if (s == "native") return AlltoallAlgo::Native;
  SPARQ_THROW(InputError, "unknown alltoall algorithm '{}' (auto, pairwise, native)", s);
}

namespace {

std::vector<std::size_t> prefix(std::span<const std::size_t> counts) {
  std::vector<std::size_t> d(counts.size() + 1, 0);
  for (std::size_t i = 0; i < counts.size(); ++i) d[i + 1] = d[i] + counts[i];
  return d;
}

void native_alltoallv(Transport& t, Bytes in, std::span<const std::size_t> sc, const std::vector<std::size_t>& sd,
                      MutBytes out, std::span<const std::size_t> rc, const std::vector<std::size_t>& rd) {
  auto* mpi = dynamic_cast<MpiTransport*>(&t);
  SPARQ_CHECK_AS(InputError, mpi != nullptr,
                 "alltoall algorithm 'native' needs the MPI transport (run under mpiexec), not '{}'", t.name());
  const int p = t.size();
  std::vector<int> isc(p), isd(p), irc(p), ird(p);
  for (int i = 0; i < p; ++i) {
    SPARQ_CHECK(sd[i + 1] <= INT_MAX && rd[i + 1] <= INT_MAX, "native alltoall beyond MPI's int counts");
    isc[i] = static_cast<int>(sc[i]);
    isd[i] = static_cast<int>(sd[i]);
    irc[i] = static_cast<int>(rc[i]);
    ird[i] = static_cast<int>(rd[i]);
  }
  mpi_check(MPI_Alltoallv(in.data(), isc.data(), isd.data(), MPI_BYTE, out.data(), irc.data(), ird.data(), MPI_BYTE,
                          mpi->comm()),
            "MPI_Alltoallv");
}

}  // namespace

CollStats alltoallv(Transport& t, Bytes in, std::span<const std::size_t> send_counts, MutBytes out,
                    std::span<const std::size_t> recv_counts, const AlltoallOptions& opts) {
  const int p = t.size(), r = t.rank();
  SPARQ_CHECK_AS(InputError, send_counts.size() == static_cast<std::size_t>(p) && recv_counts.size() == send_counts.size(),
                 "alltoallv: {} send and {} receive counts for {} ranks", send_counts.size(), recv_counts.size(), p);
  const auto sd = prefix(send_counts), rd = prefix(recv_counts);
  SPARQ_CHECK_AS(InputError, sd[p] == in.size() && rd[p] == out.size(),
                 "alltoallv: counts sum to {} sent / {} received bytes, buffers hold {} / {}", sd[p], rd[p], in.size(),
                 out.size());
  const std::string name(alltoall_algo_name(opts.algo));
  Call c(t, "alltoall/" + name, opts.tag, opts.timeout);
  if (opts.algo == AlltoallAlgo::Native) {
    native_alltoallv(t, in, send_counts, sd, out, recv_counts, rd);
    CollStats s = c.finish(name);
    s.counted = false;
    return s;
  }
  SPARQ_CHECK_AS(InputError, send_counts[r] == recv_counts[r], "alltoallv: rank {} sends itself {} bytes but expects {}",
                 r, send_counts[r], recv_counts[r]);
  // In place (or any overlap): blocks received early would overwrite blocks
  // not yet sent, so send from a copy.
  std::vector<std::byte> copy;
  if (!in.empty() && !out.empty() && in.data() < out.data() + out.size() && out.data() < in.data() + in.size()) {
    copy.assign(in.begin(), in.end());
    in = copy;
  }
  if (send_counts[r]) std::memcpy(out.data() + rd[r], in.data() + sd[r], send_counts[r]);
  for (int s = 1; s < p; ++s) {
    const int to = pattern::mod(r + s, p), from = pattern::mod(r - s, p);
    c.sendrecv(to, in.subspan(sd[to], send_counts[to]), from, out.subspan(rd[from], recv_counts[from]));
  }
  return c.finish(name);
}

template <class T>
CollStats alltoall(Transport& t, std::span<const T> in, std::span<T> out, const AlltoallOptions& opts) {
  const std::size_t p = static_cast<std::size_t>(t.size());
  SPARQ_CHECK_AS(InputError, in.size() % p == 0 && out.size() == in.size(),
                 "alltoall: input of {} and output of {} elements must be equal and divisible by {} ranks", in.size(),
                 out.size(), p);
  const std::vector<std::size_t> counts(p, in.size() / p * sizeof(T));
  return alltoallv(t, std::as_bytes(in), counts, std::as_writable_bytes(out), counts, opts);
}

#define X(T) template CollStats alltoall<T>(Transport&, std::span<const T>, std::span<T>, const AlltoallOptions&);
SPARQ_FOR_EACH_DTYPE(X)
#undef X

}  // namespace sparq
