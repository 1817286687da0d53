#pragma once
// Exact magnitude selection: the sparsity threshold of DCT-DP/DCT-MP and
// top-k by |x|, by selection (nth_element, O(n) expected), never a full sort.
//
// Sparsity factor eta in [0, 1] means "drop the fraction eta": of n values,
// floor(n * eta) are dropped and n - floor(n * eta) kept. n * eta is computed
// in double with a 1e-9 slack before the floor, so eta = 0.95 of 20 drops 19,
// not 18 (0.95 has no exact binary form).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace sparq::compress {

// floor(n * eta); InputError unless 0 <= eta <= 1.
std::size_t dropped_count(std::size_t n, double eta);
inline std::size_t kept_count(std::size_t n, double eta) { return n - dropped_count(n, eta); }

// tau = element floor(n * eta) (0-based) of |x| sorted ascending, the DCT
// papers' threshold: the mask |x| >= tau keeps n - floor(n * eta) values when
// magnitudes are distinct (more on ties at tau). eta = 1 (position n) gives
// +inf; n = 0 gives +inf. NaN or inf in x throws NonFiniteError (NaN has no
// rank; an infinite magnitude is never a useful threshold).
// `scratch` is resized to n and reused across calls (no allocation per call
// once it is large enough).
float sparsity_threshold(std::span<const float> x, double eta, std::vector<float>& scratch);
// The same threshold for the element-wise fp32 sum x + y (y empty: x), without
// writing the sum anywhere: DCT-DP's W = grad + E, left untouched if this throws.
float sparsity_threshold_of_sum(std::span<const float> x, std::span<const float> y, double eta,
                                std::vector<float>& scratch);

// Exactly min(k, n) indices of the largest |x|, ascending. Ties at the
// smallest kept magnitude go to the lowest indices. NaN or inf throws
// NonFiniteError.
// Writes the indices to idx (resized) using `scratch` for magnitudes.
void topk_indices(std::span<const float> x, std::size_t k, std::vector<std::uint32_t>& idx,
                  std::vector<float>& scratch);

// Bucket top-k (SparCML's experiments): in every run of `bucket` consecutive
// values (the last run may be shorter) keep the min(k, run) largest |x| as in
// topk_indices. Returns the global indices (ascending) and their values.
void bucket_topk(std::span<const float> x, std::size_t bucket, std::size_t k, std::vector<std::uint32_t>& idx,
                 std::vector<float>& val);

}  // namespace sparq::compress
