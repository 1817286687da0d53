#pragma once
// The cores of one modelled host, for SimTransport: a rank's threads (its
// training thread and its communication thread) compute on them, so their
// computation no longer overlaps for free when there are fewer cores than
// threads (a rank bound to one core; the shaped cluster's hosts, which share
// this machine's cores).
//
// Each core keeps the intervals of modelled time it is busy. Work that a
// thread did from time `start` on runs on the core where it ends first,
// filling the gaps other threads' work left after `start` (the threads report
// their work after doing it, not in time order, so work is fitted into the
// past as well as appended). A thread's work is never split across cores.
#include <map>
#include <mutex>
#include <vector>

namespace sparq {

class HostCores {
 public:
  explicit HostCores(int cores);
  // Places `work` seconds of computation from `start` on; returns when it ends.
  double run(double start, double work);
  // Drops what ends before t: no thread of the host will place work before t.
  void forget_before(double t);

 private:
  // Per core: begin -> end of its busy intervals, disjoint, touching ones merged.
  std::vector<std::map<double, double>> cores_;
};

// The cores that every in-process rank computes on (sparq train
// --shared-cores): the hosts of a cluster emulated on one machine
// (scripts/cluster's network namespaces on this machine's cores) share its
// cores, so a host that waits lends its core to the others, and hosts that
// all compute at once slow each other down. Every rank's threads place their
// work on these cores as on HostCores; thread-safe.
class SharedCores {
 public:
  SharedCores(int cores, int ranks);
  // Places `work` seconds from `start` on for `rank`, no thread of which
  // will place work before `floor` from now on; returns when it ends.
  double run(int rank, double start, double work, double floor);

 private:
  std::mutex mu_;
  HostCores cores_;
  std::vector<double> floors_;  // per rank
};

}  // namespace sparq
