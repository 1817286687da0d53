#pragma once
// Residuals of error-feedback compression (DCT-DP, QSGD/top-k with error
// accumulation), one fp32 buffer per tensor, keyed by a stable tensor name so
// they survive any re-bucketing or fusion of tensors into messages.
//
// Optional stochastic drain (the DCT paper drained its shared buffer every
// 1M iterations to stop stale error from growing): on steps divisible by
// `every`, each residual element is zeroed independently with probability
// `fraction`, drawn from Philox keyed by (seed, step, tensor name, element),
// so the drain is reproducible and independent of call order.
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sparq/compress/stream_codec.h"

namespace sparq {
class BlobWriter;
class BlobReader;
}  // namespace sparq

namespace sparq::compress {

// Low-precision sending with error feedback (SparCML Algorithm 1, E = acc -
// Q(sent)): rounds the sparse stream's values to vf and adds what rounding
// took back into the residual e (e.size() == sent.dim(), sent sparse).
void round_with_feedback(SparseStream& sent, std::span<float> e, ValueFormat vf);

struct DrainOptions {
  std::uint64_t every = 0;  // 0 = never drain
  double fraction = 1.0;    // probability that an element is zeroed at a drain
  std::uint64_t seed = 0;
};

class ErrorFeedbackStore {
 public:
  explicit ErrorFeedbackStore(DrainOptions drain = {});

  // The residual of `name`, created as n zeros on first use. A later call
  // with another n throws InputError (a tensor does not change shape).
  std::span<float> residual(std::string_view name, std::size_t n);
  // The residual of `name`, empty if there is none.
  std::span<const float> find(std::string_view name) const;
  void erase(std::string_view name);

  std::size_t tensors() const { return buffers_.size(); }
  // Memory held by the residuals (their float payload).
  std::size_t bytes() const;

  // Drains if `step` is a drain step (step > 0, every > 0, every | step);
  // returns whether it did. Call once per training step.
  bool maybe_drain(std::uint64_t step);
  std::uint64_t drains() const { return drains_; }

  // Adds `other`'s residuals to these, tensor by tensor (a tensor only there
  // is taken as it is; one of another size is an InputError): the residuals
  // are sums of what was not sent, so two ranks' fold into one.
  void add(const ErrorFeedbackStore& other);

  // Every residual and the drain count, bit for bit; load() replaces them.
  void save(BlobWriter& w) const;
  void load(BlobReader& r);

 private:
  DrainOptions drain_;
  std::uint64_t drains_ = 0;
  std::map<std::string, std::vector<float>, std::less<>> buffers_;
};

}  // namespace sparq::compress
