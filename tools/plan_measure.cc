// `sparq plan --measure`: the network between the hosts, from sparq's own
// collectives timed on them (the fit of scripts/fit-net.py, without the
// network stack's CPU, which only the machine's system time shows).
#include <fmt/format.h>

#include <algorithm>

#include "sparq/core/error.h"
#include "sparq/plan/fit_net.h"
#include "tools/bench_collectives.h"
#include "tools/plan.h"

namespace sparq::cli {

namespace {
// Every size is timed in rounds, the rounds one after another: a burst of
// other load on the hosts slows one round of a size rather than all its
// iterations (under ctest, 16 and 64 KiB once took 0.56 ms against 0.04 ms
// for 256 KiB, and no bandwidth could be fitted). A size's time is the
// median of its rounds' medians.
constexpr int kRounds = 3;

std::vector<Row> median_of_rounds(const std::vector<std::vector<Row>>& rounds) {
  std::vector<Row> out = rounds.front();
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::vector<double> us;
    out[i].wrong = 0;
    for (const std::vector<Row>& round : rounds) us.push_back(round[i].median_us), out[i].wrong += round[i].wrong;
    out[i].median_us = percentile(us, 0.5);
  }
  return out;
}
}  // namespace

std::optional<std::string> measure_net(Transport& t, double timeout_s) {
  const int p = t.size();
  // A ring step of at most one 1 MiB segment is one message (larger ones
  // pipeline several), so the sizes stop at P MiB.
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t s = 16 << 10; s <= std::min<std::uint64_t>(4 << 20, static_cast<std::uint64_t>(p) << 20); s *= 4)
    sizes.push_back(s);
  BenchFlags f;
  f.iters = 10, f.warmup = 3, f.timeout_s = timeout_s;
  struct Timed {
    const char* what;
    Row row;
    plan::CollectiveTime time;
  };
  std::vector<std::vector<Row>> ring, alltoall;
  for (int round = 0; round < kRounds; ++round) {
    ring.push_back(ring_allreduce_rows(t, f, sizes));
    alltoall.push_back(pairwise_alltoall_rows(t, f, sizes));
  }
  std::vector<Timed> timed;
  for (const Row& r : median_of_rounds(ring))
    timed.push_back({"ring allreduce", r, {2.0 * (p - 1), r.bytes_sent_per_rank, r.median_us * 1e-6}});
  for (const Row& r : median_of_rounds(alltoall))
    timed.push_back({"pairwise alltoall", r, {p - 1.0, r.bytes_sent_per_rank, r.median_us * 1e-6}});
  for (const Timed& x : timed)
    SPARQ_CHECK(x.row.wrong == 0, "--measure: the {} of {} bytes gave {} wrong values", x.what, x.row.size,
                x.row.wrong);
  if (t.rank() != 0) return std::nullopt;
  std::vector<plan::CollectiveTime> times;
  for (const Timed& x : timed) times.push_back(x.time);
  plan::NetFit fit;
  try {
    fit = plan::fit_alpha_beta(times);
  } catch (const InputError& e) {  // with what was measured, so that the cause shows
    std::string seen;
    for (const Timed& x : timed) seen += fmt::format("; {} {} B {:.3f} ms", x.what, x.row.size, x.time.seconds * 1e3);
    SPARQ_THROW(InputError, "{} (measured{})", e.what(), seen);
  }
  for (const Timed& x : timed) {
    const double model = x.time.messages * fit.latency_s + x.time.bytes * fit.seconds_per_byte;
    fmt::print("measured {:>17} {:>8} B: {:8.3f} ms, the fit {:8.3f} ms ({:.2f}x)\n", x.what, x.row.size,
               x.time.seconds * 1e3, model * 1e3, model / x.time.seconds);
  }
  fmt::print("measured network: {} (latency and bandwidth fitted to the {} collectives above; the network stack's "
             "CPU per byte and message not measured)\n",
             fit.spec(), times.size());
  return fit.spec();
}

}  // namespace sparq::cli
