#pragma once
// Threshold-mask-pack, the inner loop of DCT-DP: the (index, value) pairs of
// the entries with |x[i]| >= tau, in index order. NaN never passes (the
// comparison is false); tau = +inf passes only infinities.
#include <cstddef>
#include <cstdint>
#include <span>

namespace sparq::compress {

// Writes the pairs to idx/val (each of size >= x.size(), else InputError) and
// returns their count. x.size() < 2^32.
std::size_t threshold_pack(std::span<const float> x, float tau, std::span<std::uint32_t> idx, std::span<float> val);

// The DCT-DP step fused into one pass (error feedback, mask, pack, residual):
//   w = grad[i] + err[i],
//   |w| >= tau: pair (i, w) written, err[i] = 0;  else err[i] = w.
// Returns the pair count; grad and err have equal sizes, idx/val as for
// threshold_pack.
std::size_t feedback_threshold_pack(std::span<const float> grad, std::span<float> err, float tau,
                                    std::span<std::uint32_t> idx, std::span<float> val);

}  // namespace sparq::compress
