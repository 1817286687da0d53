#include "sparq/transport/group_transport.h"

#include <algorithm>
#include <cstdint>

#include "sparq/transport/forwarded_state.h"

namespace sparq {

namespace {

std::unique_ptr<RequestState> forward(Request inner) {
  auto s = std::make_unique<ForwardedState>();
  s->inner = std::move(inner);
  return s;
}

}  // namespace

GroupTransport::GroupTransport(Transport& parent, std::vector<int> members)
    : parent_(parent), members_(std::move(members)), name_(fmt::format("group({})", parent.name())) {
  const int p = parent.size();
  std::vector<bool> seen(p, false);
  for (int r : members_) {
    SPARQ_CHECK_AS(InputError, r >= 0 && r < p, "group member {} is not a rank of the {}-rank parent '{}'", r, p,
                   parent.name());
    SPARQ_CHECK_AS(InputError, !seen[r], "group member {} is listed twice", r);
    seen[r] = true;
  }
  const auto self = std::find(members_.begin(), members_.end(), parent.rank());
  SPARQ_CHECK_AS(InputError, self != members_.end(), "group [{}] does not contain this rank ({})",
                 fmt::join(members_, ","), parent.rank());
  rank_ = static_cast<int>(self - members_.begin());
  init_counters(size());
  set_timeout(parent.timeout());
}

std::unique_ptr<RequestState> GroupTransport::do_isend(int peer, int tag, Bytes data) {
  return forward(parent_.isend(members_[peer], tag, data));
}

std::unique_ptr<RequestState> GroupTransport::do_irecv(int peer, int tag, MutBytes buf) {
  return forward(parent_.irecv(members_[peer], tag, buf));
}

std::unique_ptr<RequestState> GroupTransport::do_irecv_message(int peer, int tag) {
  return forward(parent_.irecv_message(members_[peer], tag));
}

std::vector<int> grid_group(int parent_size, int d, int m, int rank, GridAxis axis) {
  SPARQ_CHECK_AS(InputError, d >= 1 && m >= 1 && std::int64_t{d} * m == parent_size,
                 "a {} x {} grid does not cover {} ranks", d, m, parent_size);
  SPARQ_CHECK_AS(InputError, rank >= 0 && rank < parent_size, "rank {} is outside the {}-rank grid", rank,
                 parent_size);
  std::vector<int> g;
  if (axis == GridAxis::Stage) {
    for (int r = 0; r < d; ++r) g.push_back(r * m + rank % m);
  } else {
    for (int s = 0; s < m; ++s) g.push_back(rank / m * m + s);
  }
  return g;
}

}  // namespace sparq
