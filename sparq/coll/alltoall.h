#pragma once
// Alltoall(v): rank r sends block j of its input to rank j and receives
// block i of its output from rank i. Blocks are contiguous, in rank order.
#include <span>
#include <string_view>

#include "sparq/coll/call.h"

namespace sparq {

// pairwise: P-1 steps; at step s send to r+s and receive from r-s, so each
// rank has one exchange in flight (no incast). native: MPI_Alltoallv.
enum class AlltoallAlgo { Pairwise, Native };
std::string_view alltoall_algo_name(AlltoallAlgo a);
AlltoallAlgo parse_alltoall_algo(std::string_view s);  // "auto" = pairwise

struct AlltoallOptions {
  AlltoallAlgo algo = AlltoallAlgo::Pairwise;
  int tag = tags::kAlltoall;
  Millis timeout{0};
};

// Byte-level: send_counts[j] bytes go to rank j, recv_counts[i] bytes come
// from rank i (both known in advance; a mismatch is a WireError). `in` and
// `out` may be the same buffer (then a copy of `in` is made).
CollStats alltoallv(Transport& t, Bytes in, std::span<const std::size_t> send_counts, MutBytes out,
                    std::span<const std::size_t> recv_counts, const AlltoallOptions& opts = {});

// Equal blocks of in.size() / P elements.
template <class T>
CollStats alltoall(Transport& t, std::span<const T> in, std::span<T> out, const AlltoallOptions& opts = {});

}  // namespace sparq
