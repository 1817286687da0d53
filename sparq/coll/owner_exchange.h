#pragma once
// Sums over the ranks on a fixed sparse pattern, with one owner per index.
// Each rank holds values on its own sorted set of indices of [0, dim) (the
// features of its rows); [0, dim) is split into P contiguous ranges, rank q
// owning range q. reduce() sums every rank's values at the owners; gather()
// brings the owners' values back to every rank that holds the index. The
// pattern is agreed once (one alltoallv of the indices); after that only
// values travel, 4 bytes each, no indices, and a rank receives only what its
// own indices need: the two-phase exchange of a distributed sparse
// matrix-vector product (PETSc's scatter of ghost values), here the
// exchange of truncated Newton (sparq/train/linear_newton.cc). Against a
// sparse allreduce of the whole vector it sends values without indices and
// leaves the vector operations to the owners (1/P of them a rank).
#include <cstdint>
#include <span>
#include <vector>

#include "sparq/coll/call.h"

namespace sparq {

class OwnerExchange {
 public:
  // Collective. `mine`: this rank's indices, sorted, unique, below dim.
  // An index list from a peer that is not sorted, not unique or outside
  // this rank's range is a WireError.
  OwnerExchange(Transport& t, std::span<const std::uint32_t> mine, std::size_t dim, Millis timeout = Millis{0});

  std::size_t owned_begin() const { return begin_; }
  std::size_t owned_size() const { return size_; }

  // owned[j - begin] = the sum over the ranks that hold j of their value at
  // j, added in rank order in float as the other sums of the project are (0
  // where no rank holds j): on 2 ranks, one addition, as a dense allreduce. `local`:
  // one value a held index, in the order of `mine` given at construction. Collective.
  CollStats reduce(Transport& t, std::span<const float> local, std::span<double> owned);
  // local[k] = the owner's value at mine[k], as a float. Collective.
  CollStats gather(Transport& t, std::span<const double> owned, std::span<float> local);

 private:
  Millis timeout_;
  std::size_t held_;  // indices this rank holds: the values of a reduce or gather
  std::size_t begin_ = 0, size_ = 0;
  // Bytes: to each owner (my indices in its range), from each rank (its indices in mine).
  std::vector<std::size_t> to_owner_, from_rank_;
  std::vector<std::uint32_t> at_;  // the received indices in rank order, less begin_
  std::vector<float> buf_, sum_;
};

}  // namespace sparq
