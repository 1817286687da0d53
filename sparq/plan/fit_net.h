#pragma once
// The alpha-beta network that a cluster's own timed collectives imply, as
// `--net BW,LAT` charges it: every message costs LAT plus its bytes over BW,
// and a rank's messages go one after another (scripts/fit-net.py fits the
// same model to stored benchmark rows; `sparq plan --measure` to its own).
#include <span>
#include <string>

namespace sparq::plan {

struct CollectiveTime {
  double messages = 0;  // in sequence on a rank: 2(P-1) for a ring allreduce, P-1 for a pairwise alltoall
  double bytes = 0;     // what a rank sent (the transport's counters)
  double seconds = 0;   // the collective's median time
};

struct NetFit {
  double latency_s = 0;         // a message's fixed cost
  double seconds_per_byte = 0;  // 1 / bandwidth
  std::string spec() const;     // "107.3MBps,42us": parse_net_model's syntax
};

// Least squares of seconds = messages * latency + bytes * seconds_per_byte,
// both kept non-negative (where the latency comes out negative it is 0 and
// the bandwidth is refitted alone). Throws InputError with fewer than two
// times, or where the times do not grow with the bytes.
NetFit fit_alpha_beta(std::span<const CollectiveTime> times);

}  // namespace sparq::plan
