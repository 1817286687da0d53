#pragma once
// DCT-DP (Gupta et al., KDD'21, Algorithm 1): hard-threshold each named
// tensor's gradient with error feedback, recomputing the top-K threshold only
// every L steps (the threshold drifts little between steps, and computing it
// is what made threshold-every-step slower than no compression at all).
//
// Per call step(name, k, grad):
//   W = grad + E                       (E: the store's residual for name)
//   if L | k, or first call for name:  tau = sparsity_threshold(W, eta)
//   sent = pairs of W with |W| >= tau  (written to `out`)
//   E = W - sent                       (0 where sent, W elsewhere)
// so sent + E == grad + E_old bit for bit. With values = Bf16 the sent
// values are rounded to bf16 and the rounding error stays in E (the identity
// still holds exactly: v - bf16(v) is a float).
//
// Adaptive option (adaptive_tolerance > 0): when a step keeps a count that
// differs from the target n - floor(n*eta) by more than tolerance * target,
// the next step recomputes tau even if L does not divide it. stats() reports
// how often that fired.
//
// Memory: the store's residual (4 bytes per value), `out`'s pair buffers (8
// bytes per value: tau may pass everything) and a 4-byte-per-value scratch
// for the threshold, shared by all tensors.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sparq/compress/error_feedback.h"
#include "sparq/compress/sparse_stream.h"

namespace sparq {
class BlobWriter;
class BlobReader;
}  // namespace sparq

namespace sparq::compress {

struct DctDpOptions {
  double eta = 0.99;                // sparsity factor: fraction dropped
  std::uint64_t life_span = 1000;   // L, >= 1
  double adaptive_tolerance = 0.0;  // 0 = off; else relative drift of the kept count
  ValueFormat values = ValueFormat::F32;  // precision of the sent values
};

struct DctDpStats {
  std::uint64_t steps = 0, recomputes = 0, adaptive_recomputes = 0;
};

// What one step did.
struct DctDpStep {
  float tau;
  std::size_t kept;
  bool recomputed;  // tau computed this step (scheduled, first, or adaptive)
  bool adaptive;    // ... because of drift
};

class DctDp {
 public:
  // `store` holds the residuals and must outlive this object.
  DctDp(DctDpOptions opts, ErrorFeedbackStore& store);

  // One step for tensor `name` at iteration k; `out` receives the sparse
  // stream of dimension grad.size(). Throws InputError on a size change, and
  // NonFiniteError on a NaN or inf in grad (on every step, before the
  // residual changes).
  DctDpStep step(std::string_view name, std::uint64_t k, std::span<const float> grad, SparseStream& out);

  // Current threshold of `name` (none before its first step), and setting
  // it from elsewhere (a codec that ran on a GPU hands its state over).
  std::optional<float> threshold(std::string_view name) const;
  void set_threshold(std::string_view name, float tau);
  const DctDpStats& stats() const { return stats_; }
  const DctDpOptions& options() const { return opts_; }

  // Every tensor's threshold and schedule, and the counts; load() replaces
  // them (the residuals are the store's, saved with it).
  void save(BlobWriter& w) const;
  void load(BlobReader& r);

 private:
  struct TensorState {
    float tau = std::numeric_limits<float>::infinity();
    bool has_tau = false;  // a tensor's first (successful) threshold step sets it
    bool recompute_next = false;
  };
  DctDpOptions opts_;
  ErrorFeedbackStore& store_;
  DctDpStats stats_;
  std::map<std::string, TensorState, std::less<>> tensors_;
  std::vector<float> mags_;
};

}  // namespace sparq::compress
