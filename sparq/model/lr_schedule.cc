#include "sparq/model/lr_schedule.h"

#include <fmt/format.h>

#include <algorithm>

#include "sparq/core/error.h"

namespace sparq {

void LrSchedule::validate() const {
  SPARQ_CHECK_AS(InputError, decay_steps > 0 || decay_start == 0,
                 "--lr-decay-start-step {} needs --lr-num-decay-steps > 0", decay_start);
  SPARQ_CHECK_AS(InputError, decay_steps == 0 || decay_start >= warmup_steps,
                 "--lr-decay-start-step {} is before the end of --lr-num-warmup-steps {}: warmup must finish before "
                 "the decay starts",
                 decay_start, warmup_steps);
}

double LrSchedule::lr(double base, std::uint64_t c) const {
  SPARQ_CHECK(c >= 1, "learning-rate schedule: update numbers start at 1");
  // The reference's arithmetic: integer differences, then one double division.
  const auto warmup = [&](std::uint64_t k) {
    return base * (1.0 - static_cast<double>(warmup_steps - k) / static_cast<double>(warmup_steps));
  };
  const auto decay = [&](std::uint64_t k) {
    const double s = static_cast<double>(decay_steps - (k - decay_start)) / static_cast<double>(decay_steps);
    return std::max(1e-7, base * (s * s));
  };
  if (c < warmup_steps) return warmup(c);
  if (decay_steps == 0) return base;
  const std::uint64_t end = decay_start + decay_steps;
  if (decay_start <= c && c < end) return decay(c);
  // Held: the last update that computed a rate. After the decay that is its
  // last step (S + D - 1 >= S >= W, so never a warmup step); before it, the
  // warmup's last. Update 0 does not exist: then there was none.
  if (c >= end) return end - 1 >= 1 ? decay(end - 1) : base;
  return warmup_steps >= 2 ? warmup(warmup_steps - 1) : base;
}

std::string LrSchedule::describe() const {
  std::string s;
  if (warmup_steps > 1) s = fmt::format("linear warmup over updates 1..{}", warmup_steps - 1);
  if (decay_steps > 0)
    s += fmt::format("{}quadratic decay over updates {}..{}", s.empty() ? "" : ", ", decay_start,
                     decay_start + decay_steps - 1);
  return s;
}

}  // namespace sparq
