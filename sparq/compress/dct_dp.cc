#include "sparq/compress/dct_dp.h"

#include <algorithm>
#include <cmath>

#include "sparq/compress/threshold_pack.h"
#include "sparq/compress/topk.h"
#include "sparq/core/blob.h"
#include "sparq/core/error.h"
#include "sparq/core/finite.h"
#include "sparq/core/kernel_costs.h"

namespace sparq::compress {

DctDp::DctDp(DctDpOptions opts, ErrorFeedbackStore& store) : opts_(opts), store_(store) {
  dropped_count(0, opts.eta);  // validates eta
  SPARQ_CHECK_AS(InputError, opts.life_span >= 1, "DCT-DP: threshold life span L must be >= 1");
  SPARQ_CHECK_AS(InputError, opts.adaptive_tolerance >= 0.0, "DCT-DP: adaptive tolerance {} < 0",
                 opts.adaptive_tolerance);
}

DctDpStep DctDp::step(std::string_view name, std::uint64_t k, std::span<const float> grad, SparseStream& out) {
  const std::size_t n = grad.size();
  // Before the residual: a step between threshold updates compares |g + E|
  // with tau, false for NaN, which would then sit in E unsent.
  SPARQ_CHECK_FINITE(grad, [&] { return fmt::format("DCT-DP: the gradient of '{}' at step {}", name, k); });
  std::span<float> err = store_.residual(name, n);
  auto it = tensors_.find(name);
  if (it == tensors_.end()) it = tensors_.emplace(std::string(name), TensorState{}).first;
  TensorState& st = it->second;
  const bool scheduled = !st.has_tau || k % opts_.life_span == 0;
  const bool adaptive = !scheduled && st.recompute_next;
  // On the virtual clock, charged by its count of values (kernel_costs.h),
  // a step that sets the threshold apart from one that only applies it.
  const ChargedKernel charged("dct_dp_step_per_value", Units{n}, scheduled || adaptive,
                              static_cast<std::size_t>(opts_.values),
                              static_cast<std::size_t>(std::lround(opts_.eta * 1e6)));
  // Pairs go straight into `out` (room for all n: tau may pass everything).
  const SparseStream::PairBuffers pairs = out.start_pairs(n, n);
  if (scheduled || adaptive) {
    // Threshold step: tau comes from |grad + E| formed in the scratch only, so
    // a NaN (InputError) leaves E and tau as they were; the fused pass below
    // forms the same fp32 sums again.
    st.tau = sparsity_threshold_of_sum(grad, err, opts_.eta, mags_);
    st.has_tau = true;
    ++stats_.recomputes;
    if (adaptive) ++stats_.adaptive_recomputes;
  }
  const std::size_t kept = feedback_threshold_pack(grad, err, st.tau, pairs.indices, pairs.values);
  ++stats_.steps;
  if (opts_.adaptive_tolerance > 0.0) {
    const double target = static_cast<double>(kept_count(n, opts_.eta));
    const double drift = std::fabs(static_cast<double>(kept) - target);
    st.recompute_next = drift > opts_.adaptive_tolerance * std::max(target, 1.0);
  }
  out.finish_pairs(kept);
  round_with_feedback(out, err, opts_.values);
  return {st.tau, kept, scheduled || adaptive, adaptive};
}

std::optional<float> DctDp::threshold(std::string_view name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end() || !it->second.has_tau) return std::nullopt;
  return it->second.tau;
}

void DctDp::set_threshold(std::string_view name, float tau) {
  SPARQ_CHECK_AS(InputError, !std::isnan(tau) && tau >= 0, "DCT-DP: threshold {} of tensor '{}' is not a magnitude",
                 tau, name);
  auto it = tensors_.find(name);
  if (it == tensors_.end()) it = tensors_.emplace(std::string(name), TensorState{}).first;
  it->second.tau = tau;
  it->second.has_tau = true;
}

void DctDp::save(BlobWriter& w) const {
  w.u64(stats_.steps);
  w.u64(stats_.recomputes);
  w.u64(stats_.adaptive_recomputes);
  w.u64(tensors_.size());
  for (const auto& [name, t] : tensors_) {
    w.str(name);
    w.f32(t.tau);
    w.u64((t.has_tau ? 1 : 0) | (t.recompute_next ? 2 : 0));
  }
}

void DctDp::load(BlobReader& r) {
  stats_.steps = r.u64();
  stats_.recomputes = r.u64();
  stats_.adaptive_recomputes = r.u64();
  const std::uint64_t n = r.u64();
  tensors_.clear();
  for (std::uint64_t i = 0; i < n; ++i) {
    std::string name = r.str();
    TensorState t;
    t.tau = r.f32();
    const std::uint64_t flags = r.u64();
    SPARQ_CHECK_AS(InputError, flags < 4, "{}: bad flags {} of tensor '{}'", r.what(), flags, name);
    t.has_tau = (flags & 1) != 0;
    t.recompute_next = (flags & 2) != 0;
    tensors_[std::move(name)] = t;
  }
}

}  // namespace sparq::compress
