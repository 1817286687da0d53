#include "sparq/plan/fit_net.h"

#include <fmt/format.h>

#include <cmath>

#include "sparq/core/error.h"

namespace sparq::plan {

std::string NetFit::spec() const {
  return fmt::format("{:.1f}MBps,{:.0f}us", 1e-6 / seconds_per_byte, latency_s * 1e6);
}

NetFit fit_alpha_beta(std::span<const CollectiveTime> times) {
  SPARQ_CHECK_AS(InputError, times.size() >= 2, "fitting a network needs at least two timed collectives, got {}",
                 times.size());
  // The normal equations of the two-column least squares [m b] x = s.
  double mm = 0, mb = 0, bb = 0, ms = 0, bs = 0;
  for (const CollectiveTime& t : times) {
    SPARQ_CHECK_AS(InputError, std::isfinite(t.seconds) && std::isfinite(t.bytes) && t.seconds >= 0 && t.bytes >= 0,
                   "a timed collective without a time or a byte count ({} s, {} bytes)", t.seconds, t.bytes);
    mm += t.messages * t.messages, mb += t.messages * t.bytes, bb += t.bytes * t.bytes;
    ms += t.messages * t.seconds, bs += t.bytes * t.seconds;
  }
  const double det = mm * bb - mb * mb;
  NetFit f;
  if (det > 1e-12 * mm * bb) {
    f.latency_s = (bb * ms - mb * bs) / det;
    f.seconds_per_byte = (mm * bs - mb * ms) / det;
  }
  if (!(det > 1e-12 * mm * bb) || f.latency_s < 0) f.latency_s = 0, f.seconds_per_byte = bb > 0 ? bs / bb : 0;
  SPARQ_CHECK_AS(InputError, f.seconds_per_byte > 0,
                 "the collectives' times do not grow with their bytes: no bandwidth to fit");
  return f;
}

}  // namespace sparq::plan
