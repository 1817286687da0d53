#pragma once
// A sub-group of another transport's ranks, seen as a transport of its own,
// for hybrid parallelism: with P = D x M ranks, each model-parallel stage's D
// replicas run collectives among themselves and each replica's M stages talk
// point to point, all over one parent transport (one MPI communicator, one
// LocalWorld).
//
// Group rank i is parent rank members[i]. Messages go through the parent's
// isend/irecv, so the parent's counters count them too; this transport's own
// counters count them per group peer. The same thread rules as the parent's
// apply (MpiTransport: one thread at a time, across all its groups).
//
// Tags pass through unchanged, so groups do not isolate traffic: two groups
// used concurrently must not contain the same pair of ranks unless they use
// distinct tags (the stage and replica groups of one grid share no pair).
// Native MPI collectives do not work on a group (it has no communicator).
#include <string>
#include <vector>

#include "sparq/transport/transport.h"

namespace sparq {

class GroupTransport final : public Transport {
 public:
  // `members`: distinct parent ranks, including parent.rank(); InputError
  // otherwise. The parent must outlive the group.
  GroupTransport(Transport& parent, std::vector<int> members);
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  std::string_view name() const override { return name_; }
  std::optional<double> virtual_time() const override { return parent_.virtual_time(); }
  void virtual_wait_until(double t) override { parent_.virtual_wait_until(t); }
  void virtual_idle() override { parent_.virtual_idle(); }
  void virtual_collective_end() override { parent_.virtual_collective_end(); }

  const std::vector<int>& members() const { return members_; }

 protected:
  std::unique_ptr<RequestState> do_isend(int peer, int tag, Bytes data) override;
  std::unique_ptr<RequestState> do_irecv(int peer, int tag, MutBytes buf) override;
  std::unique_ptr<RequestState> do_irecv_message(int peer, int tag) override;

 private:
  Transport& parent_;
  std::vector<int> members_;
  int rank_ = 0;
  std::string name_;
};

// Ranks of a D x M grid, laid out rank = replica * M + stage:
//  - Stage: the D replicas of this rank's stage s: {s, M+s, ..., (D-1)M+s};
//  - Replica: the M stages of this rank's replica r: {rM, ..., rM+M-1}.
// Both in increasing order, so group rank = replica (Stage) or stage (Replica).
enum class GridAxis { Stage, Replica };

// Members of `rank`'s group along `axis`; InputError unless parent_size == d*m
// (d, m >= 1) and rank is in [0, parent_size).
std::vector<int> grid_group(int parent_size, int d, int m, int rank, GridAxis axis);

}  // namespace sparq
