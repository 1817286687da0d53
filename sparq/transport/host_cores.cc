#include "sparq/transport/host_cores.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "sparq/core/error.h"

namespace sparq {

namespace {

using Busy = std::map<double, double>;

// Where `work` from `start` on ends on `core`, filling its gaps; the pieces
// it would take go to `pieces` when given.
double walk(const Busy& core, double start, double work, std::vector<std::pair<double, double>>* pieces) {
  double t = start;
  auto it = core.upper_bound(t);
  if (it != core.begin() && std::prev(it)->second > t) t = std::prev(it)->second;  // start inside busy time
  for (; it != core.end() && work > 0; ++it) {
    const double use = std::min(it->first - t, work);
    if (use > 0) {
      if (pieces) pieces->emplace_back(t, t + use);
      work -= use;
      if (work <= 0) return t + use;
    }
    t = it->second;
  }
  if (pieces) pieces->emplace_back(t, t + work);
  return t + work;
}

void add(Busy& core, double a, double b) {
  auto it = core.lower_bound(a);
  if (it != core.begin() && std::prev(it)->second >= a) {
    it = std::prev(it);
    a = it->first;
    b = std::max(b, it->second);
    it = core.erase(it);
  }
  while (it != core.end() && it->first <= b) {
    b = std::max(b, it->second);
    it = core.erase(it);
  }
  core.emplace(a, b);
}

}  // namespace

HostCores::HostCores(int cores) {
  SPARQ_CHECK_AS(InputError, cores >= 1, "a host needs at least one core, got {}", cores);
  cores_.resize(static_cast<std::size_t>(cores));
}

double HostCores::run(double start, double work) {
  if (work <= 0) return start;
  std::size_t best = 0;
  double end = walk(cores_[0], start, work, nullptr);
  for (std::size_t c = 1; c < cores_.size(); ++c)
    if (const double e = walk(cores_[c], start, work, nullptr); e < end) end = e, best = c;
  std::vector<std::pair<double, double>> pieces;
  walk(cores_[best], start, work, &pieces);
  for (const auto& [a, b] : pieces) add(cores_[best], a, b);
  return end;
}

void HostCores::forget_before(double t) {
  for (Busy& core : cores_)
    while (!core.empty() && core.begin()->second < t) core.erase(core.begin());
}

SharedCores::SharedCores(int cores, int ranks) : cores_(cores), floors_(static_cast<std::size_t>(ranks), 0.0) {}

double SharedCores::run(int rank, double start, double work, double floor) {
  std::lock_guard lk(mu_);
  const double end = cores_.run(start, work);
  floors_.at(static_cast<std::size_t>(rank)) = floor;
  // Kept: what any rank may still fill gaps before.
  cores_.forget_before(*std::min_element(floors_.begin(), floors_.end()));
  return end;
}

}  // namespace sparq
