#pragma once
// The learning-rate schedule of the DLRM reference (dlrm_s_pytorch.py's
// LRPolicyScheduler): linear warmup over W steps, then from step S a
// quadratic decay over D steps to at least 1e-7, then the last rate held.
// For step c (see below) and base rate b:
//
//   c < W                : b * (1 - (W - c) / W)
//   S <= c < S + D       : max(1e-7, b * ((D - (c - S)) / D)^2)
//   otherwise, D > 0     : the rate of the last step that took one of the two
//                          branches above (after the decay, or between warmup
//                          and decay); b when there was none
//   otherwise            : b
//
// Step numbering: the reference calls scheduler.step() after every
// optimizer.step(), and PyTorch's scheduler already stepped once at
// construction, so its k-th optimizer update (k = 1, 2, ...) runs with the
// rate computed for c = k. sparq's Optimizer uses the same: its update number
// k (1-based, Optimizer::steps() + 1) is c.
//
// Where the reference stops with an error and sparq does not: the reference
// needs S >= W even without a decay (sparq only when D > 0), and it fails on
// "the last rate" when none was computed yet (W <= 1 and 1 < c < S, or S + D
// <= 1); sparq holds b there.
#include <cstdint>
#include <string>

namespace sparq {

struct LrSchedule {
  std::uint64_t warmup_steps = 0;  // W (0 and 1: no warmup, as in the reference)
  std::uint64_t decay_start = 0;   // S
  std::uint64_t decay_steps = 0;   // D (0: no decay)

  bool active() const { return warmup_steps > 1 || decay_steps > 0; }
  // Throws InputError naming the flags when S < W with a decay, or S is set without one.
  void validate() const;
  // The rate of update c (1-based) for base rate `base`.
  double lr(double base, std::uint64_t c) const;
  // "linear warmup over updates 1..99, quadratic decay over updates 200..1199"
  // (empty when inactive).
  std::string describe() const;
};

}  // namespace sparq
