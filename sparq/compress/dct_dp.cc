#include "sparq/compress/dct_dp.h"

#include <cmath>
#include <limits>

#include "sparq/compress/threshold_pack.h"
#include "sparq/compress/topk.h"
#include "sparq/core/error.h"

namespace sparq::compress {

DctDp::DctDp(DctDpOptions opts, ErrorFeedbackStore& store) : opts_(opts), store_(store) {
  dropped_count(0, opts.eta);  // validates eta
  SPARQ_CHECK_AS(InputError, opts.life_span >= 1, "DCT-DP: threshold life span L must be >= 1");
  SPARQ_CHECK_AS(InputError, opts.adaptive_tolerance >= 0.0, "DCT-DP: adaptive tolerance {} < 0",
                 opts.adaptive_tolerance);
}

DctDpStep DctDp::step(std::string_view name, std::uint64_t k, std::span<const float> grad, SparseStream& out) {
  const std::size_t n = grad.size();
  std::span<float> err = store_.residual(name, n);
  auto it = tensors_.find(name);
  const bool first = it == tensors_.end();
  if (first) it = tensors_.emplace(std::string(name), TensorState{std::numeric_limits<float>::infinity(), false}).first;
  TensorState& st = it->second;
  const bool scheduled = first || k % opts_.life_span == 0;
  const bool adaptive = !scheduled && st.recompute_next;
  // Pairs go straight into `out` (room for all n: tau may pass everything).
  const SparseStream::PairBuffers pairs = out.start_pairs(n, n);
  std::size_t kept;
  if (scheduled || adaptive) {
    // Threshold step: W must exist in full before tau can be chosen, so the
    // feedback add is its own pass, then the mask pass reads W from err.
    for (std::size_t i = 0; i < n; ++i) err[i] += grad[i];
    st.tau = sparsity_threshold(err, opts_.eta, mags_);
    kept = feedback_threshold_pack({}, err, st.tau, pairs.indices, pairs.values);
    ++stats_.recomputes;
    if (adaptive) ++stats_.adaptive_recomputes;
  } else {
    kept = feedback_threshold_pack(grad, err, st.tau, pairs.indices, pairs.values);
  }
  ++stats_.steps;
  if (opts_.adaptive_tolerance > 0.0) {
    const double target = static_cast<double>(kept_count(n, opts_.eta));
    const double drift = std::fabs(static_cast<double>(kept) - target);
    st.recompute_next = drift > opts_.adaptive_tolerance * std::max(target, 1.0);
  }
  out.finish_pairs(kept);
  return {st.tau, kept, scheduled || adaptive, adaptive};
}

float DctDp::threshold(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? std::numeric_limits<float>::infinity() : it->second.tau;
}

}  // namespace sparq::compress
