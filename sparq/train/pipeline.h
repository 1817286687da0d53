#pragma once
// Model parallelism: the DLRM cut into stages (plan_stages, --mp-splits), one
// stage per rank of a transport (rank = stage), trained with a GPipe
// schedule: the batch is split into --micro-batches; every stage runs the
// forward pass of each micro-batch as soon as its input arrives and sends the
// activation X_act on, then the backward passes in reverse order, sending the
// gradient X_grad back; parameter gradients accumulate over the micro-batches
// and each stage applies its own update at the end of the step. While stage
// s works on micro-batch i, stage s-1 already works on i+1.
//
// --mp-codec compresses what crosses a cut:
//   none      fp32 activations and gradients
//   dct:ETA   DCT-MP: per sample keep the top (1-ETA) of X_act by magnitude,
//             send values + bitmask; X_grad goes back under the same mask
//             (values only: both sides hold the mask)
// and the paper's negative results (its Appendix A), for comparison:
//   topk-grad:ETA  X_act in fp32; X_grad + residual top (1-ETA) per sample with
//                  values + bitmask, the rest kept as error feedback
//   sketch:ETA     X_act sent as X S (S: d x r Gaussian, r = d - floor(ETA d),
//                  entries N(0, 1/r), drawn from a seed both sides share per
//                  step and micro-batch), received as X S S^T; X_grad in fp32
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "sparq/core/blob.h"
#include "sparq/compress/dct_mp.h"
#include "sparq/data/batch.h"
#include "sparq/model/dlrm.h"
#include "sparq/model/optimizer.h"
#include "sparq/train/grad_exchange.h"

namespace sparq {

struct MpCodec {
  enum class Kind { None, Dct, TopkGrad, Sketch };
  Kind kind = Kind::None;
  double eta = 0;  // fraction dropped: of each sample's X_act (dct) or X_grad (topk-grad), or sketch width
  // dct: an L1 penalty of this weight, per sample, on the activations each
  // cut's top-k drops, applied by the sending stage alone (no bytes), so
  // that the top-k has nothing left to drop: for studying where DCT-MP's
  // cost comes from (docs/results.md). sparq's, not the DCT paper's.
  double drop_l1 = 0;
  // dct: X_grad crosses dense, not through the forward mask: an ablation
  // (the paper reuses the mask backward), for telling a cut's forward
  // bottleneck from its sparse gradient.
  bool dense_grad = false;
  // dct: the kept values' format on the wire, both ways ("+bf16": sparq's,
  // twice the values in the bytes of fp32's).
  compress::ValueFormat values = compress::ValueFormat::F32;
  std::string text = "none";  // as given, for reports
};
// "none", "dct:0.95[+bf16][,l1=0.001][,grad=dense]", "topk-grad:0.9", "sketch:0.75". Throws InputError.
MpCodec parse_mp_codec(std::string_view s);

struct PipelineStepStats {
  double loss_sum = 0;       // last stage: summed loss of the batch (others 0)
  std::size_t samples = 0;   // last stage: samples in it (others 0)
  std::size_t correct = 0;   // last stage: predictions that equal the label
  ExchangeStats x_act;       // what this stage sent forward
  ExchangeStats x_grad;      // what this stage sent backward
  double forward_s = 0, backward_s = 0, optimizer_s = 0;  // computing: busy = their sum
  double idle_s = 0;         // waiting for a neighbour's message
  double threshold_sum = 0;  // with track_threshold: per-sample top-K thresholds of X_act summed ...
  std::size_t threshold_rows = 0;  // ... over this many samples
  bool skipped = false;      // before_update said no: the step changed nothing
};

class Pipeline {
 public:
  // `stage` holds stage t.rank() of the plan; every rank passes the same
  // batch to step(). References must outlive the pipeline.
  Pipeline(Transport& t, Dlrm<float>& stage, Optimizer<float>& opt, std::size_t micro_batches, MpCodec codec);

  // One training step on `batch`: the loss gradient is that of the batch's
  // mean times `weight` (hybrid: replicas with uneven shares). Between the
  // backward pass and the update, `before_update` runs (hybrid: the stage's
  // gradients are averaged over its replicas there).
  // `pooled` (the middle stage, table-wise embeddings): where its lookups
  // come from (Dlrm::stage_begin).
  // `k`, the training step, names the step in errors: a NaN or inf crossing a
  // cut throws NonFiniteError naming it, the stage and the micro-batch (with
  // zero_non_finite: is sent as 0, and non_finite_sent() says so).
  // before_update returns whether to update; false skips the update and the
  // step (PipelineStepStats::skipped), the caller restoring the codec state.
  PipelineStepStats step(const Batch& batch, std::uint64_t k, double weight = 1,
                         const std::function<bool()>& before_update = {},
                         const Dlrm<float>::PooledSource* pooled = nullptr);

  // Steps send a NaN or inf crossing a cut as 0 instead of throwing, so that
  // every stage finishes the step and the ranks can agree to skip it
  // (--non-finite skip); prediction still throws.
  void zero_non_finite(bool on) { zero_non_finite_ = on; }
  // Whether this stage sent such a value in the step that last ran.
  bool non_finite_sent() const { return non_finite_sent_; }

  // Also measure, for every sample of X_act this stage sends, the top-K
  // threshold at sparsity `eta` (the |value| below which a fraction eta of
  // the row lies): the DCT paper's Figure 5, with and without DCT-MP.
  void track_threshold(double eta) { threshold_eta_ = eta; }
  // topk-grad's residuals (the only state the cut codecs keep across steps).
  void save_state(BlobWriter& w) const;
  void load_state(BlobReader& r);

  // Forward only (testing): the logits of `batch` on the last stage, empty elsewhere.
  std::vector<float> predict(const Batch& batch);

 private:
  // Runs the forward passes (and the last stage's loss) of every micro-batch.
  void forward_all(const Batch& batch, std::size_t micro, double weight, PipelineStepStats& st,
                   std::vector<float>* logits, const Dlrm<float>::PooledSource* pooled = nullptr);
  // X_act of micro-batch mb to the next stage / X_grad to the previous one,
  // encoded with the codec (DCT-MP: the mask chosen forward is reused back).
  void send_act(std::size_t mb, std::span<const float> y, std::size_t cols, PipelineStepStats& st);
  std::span<const float> recv_act(std::size_t mb, std::size_t rows, std::size_t cols, PipelineStepStats& st);
  void send_grad(std::size_t mb, std::span<const float> dx, PipelineStepStats& st);
  // v, checked (what() names it in the error), or with zero_non_finite in a
  // step its copy with every NaN and inf set to 0 (alive until wait_sends()).
  template <class What>
  std::span<const float> finite(std::span<const float> v, What&& what);
  std::span<const float> recv_grad(std::size_t mb, std::size_t rows, std::size_t cols, PipelineStepStats& st);
  void wait_sends();
  bool grad_crosses_dense() const {
    return codec_.kind == MpCodec::Kind::None || codec_.kind == MpCodec::Kind::Sketch ||
           (codec_.kind == MpCodec::Kind::Dct && codec_.dense_grad);
  }

  Transport& t_;
  Dlrm<float>& model_;
  Optimizer<float>& opt_;
  std::size_t micro_;
  MpCodec codec_;
  int stage_, stages_;
  std::vector<compress::RowMask> out_masks_, in_masks_;  // per micro-batch, toward s+1 / from s-1
  std::vector<std::vector<std::byte>> send_bufs_;       // alive until their sends complete
  std::vector<Request> sends_;
  std::vector<std::vector<float>> in_acts_, in_grads_;   // per micro-batch, dense
  std::vector<std::vector<float>> dlogits_;              // last stage, per micro-batch
  std::vector<float> scratch_, row_scratch_;
  std::vector<std::vector<float>> grad_residual_;  // topk-grad: error feedback per micro-batch slot
  std::vector<float> sketch_;                       // sketch: S of the current micro-batch [d x r]
  std::uint64_t step_ = 0;                          // sketch: seeds S with the step
  std::string at_;                                  // "step K" in step(), "prediction" in predict(): for errors
  bool zero_non_finite_ = false, in_step_ = false, non_finite_sent_ = false;
  std::vector<std::vector<float>> zeroed_;          // finite(): copies alive until their sends complete
  float loss_scale_ = 0;                            // weight / batch size of the step in progress
  // sketch: S for (step_, mb) of a cut with `cols` inputs: [cols x r].
  const std::vector<float>& sketch_matrix(std::size_t mb, std::size_t cols);
  double threshold_eta_ = -1;
  std::vector<std::byte> recv_buf_;
};

}  // namespace sparq
