#pragma once
// Data-parallel exchange of dense gradients (`--dp-codec`): every rank hands
// in its gradient of a named tensor and gets back the average over ranks of
// what the ranks sent, which is the exact average for `none` and the
// compressed one otherwise:
//
//   none          dense allreduce
//   dct:ETA,L     DCT-DP: error feedback, per-tensor threshold recomputed
//                 every L steps, sparse allreduce of what passes (Gupta et al.)
//   topk:K/B      SparCML's TopK SGD: keep the K largest of every B values
//                 of gradient + residual, residual keeps the rest; sparse allreduce
//   q8|q4|q2[+ec] row-wise quantized ring allreduce (+ec: per-hop error
//                 compensation with residuals kept per tensor;
//                 +ec-skip-first: on every hop but a chunk's first, as in
//                 Yang et al.'s Algorithm 2; ring only)
//   qsgd:BITS     QSGD-quantized ring allreduce
//
// `--dp-allreduce` picks the collective of the chosen codec: a dense
// algorithm (auto, ring, recursive-doubling, rabenseifner, native) for
// `none`, ring or recursive-doubling for the quantized codecs, a sparse one
// (auto, ssar-recursive-double, ssar-split-allgather, dsar-split-allgather,
// dense) for dct and topk.
//
// The residuals of every codec live in one ErrorFeedbackStore under the
// tensor's name, so they survive re-bucketing or fusion of tensors.
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "sparq/coll/allreduce.h"
#include "sparq/coll/codec.h"
#include "sparq/coll/quantized.h"
#include "sparq/coll/sparse_allreduce.h"
#include "sparq/compress/dct_dp.h"
#include "sparq/compress/error_feedback.h"
#include "sparq/core/blob.h"

namespace sparq {

struct DpCodec {
  enum class Kind { None, Dct, TopK, Quantized };
  Kind kind = Kind::None;
  double eta = 0.99;            // dct: fraction dropped
  std::uint64_t life_span = 1000;  // dct: L
  std::size_t k = 0, bucket = 512;  // topk: keep k of every bucket values
  Codec codec{};                // quantized: the wire codec (row-wise or QSGD)
  AllreduceAlgo dense_algo = AllreduceAlgo::Auto;  // none
  QuantAlgo quant_algo = QuantAlgo::Ring;          // quantized
  SparseAlgo sparse_algo = SparseAlgo::Auto;       // dct, topk
  compress::ValueFormat values = compress::ValueFormat::F32;  // dct, topk: "+bf16", "+fp8", "+fp4"
  std::string text = "none";    // as given, for reports
};

// "none", "dct:0.99,1000", "topk:5/512", "q8", "q4+ec", "q4+ec-skip-first", "q2", "qsgd:4" (dct
// and topk take "+bf16", "+fp8" or "+fp4": the values of their sparse
// streams in bfloat16, scaled fp8 E4M3 or fp4 E2M1 with a scale per 32
// values, rounding error fed back), and
// the collective `allreduce` for it (see above; "auto" fits every codec).
// Throws InputError naming what is wrong.
DpCodec parse_dp_codec(std::string_view s, std::string_view allreduce = "auto");

// Bytes a rank sends in a dense fp32 ring allreduce of n values over p ranks,
// 2(p-1)/p * 4n: the baseline of the dense gradients' compression ratios.
std::uint64_t dense_ring_bytes(int p, std::size_t n);

// Bytes a rank sends in an fp32 allgather of a row-sparse gradient of `rows`
// touched rows of `dim` values, each with a 4-byte row index, to the p - 1
// others: (p-1) * rows * 4(1 + dim). The baseline of the replicated tables'
// gradients, the plain way to exchange them (PyTorch's sparse allreduce over
// Gloo is such an allgather, with 8-byte indices); a dense allreduce of the
// whole tables, which nobody runs, would make any sparse exchange look
// thousands of times smaller.
std::uint64_t row_sparse_allgather_bytes(int p, std::size_t rows, std::size_t dim);

// A step's phases in modelled time (a virtual clock): forward includes
// waiting for the lookups, wait is the training thread's wait for the
// exchanges after its backward. What grows with the rank count shows here.
struct ModeledPhases {
  double forward = 0, backward = 0, wait = 0, optimizer = 0;
  ModeledPhases& operator+=(const ModeledPhases& o) {
    forward += o.forward, backward += o.backward, wait += o.wait, optimizer += o.optimizer;
    return *this;
  }
};

// What one exchange cost this rank.
struct ExchangeStats {
  std::uint64_t bytes_sent = 0;      // transport counters
  // The fp32 baseline, what the plain exchange of the same data would send:
  // dense gradients a ring allreduce (dense_ring_bytes), replicated tables an
  // allgather of the touched rows (row_sparse_allgather_bytes), alltoalls and
  // model-parallel cuts their values in fp32.
  std::uint64_t dense_bytes = 0;
  double compress_seconds = 0;       // selection / error feedback before the collective
  double comm_seconds = 0;           // the collective (including its encoding)
  double wait_seconds = 0;           // the training thread blocked on it (== comm when not overlapped)
  double modeled_seconds = 0;        // on a virtual clock: its modelled time on the communication thread
  std::size_t kept = 0;              // values this rank sent (n for dense codecs)
  std::size_t values = 0;            // values of the tensors exchanged (kept / values: density)
  bool counted = true;               // false when bytes bypassed the counters (native MPI)
  ExchangeStats& operator+=(const ExchangeStats& o);
};

// An auto sparse allreduce's plan in a state blob: the algorithm that runs
// decides the order of the sum, so a bit-for-bit resume needs the plan too.
void save_history(BlobWriter& w, const SparseAutoHistory& h);
SparseAutoHistory load_history(BlobReader& r);

class GradExchange {
 public:
  // `residuals` must outlive the exchange.
  GradExchange(DpCodec codec, compress::ErrorFeedbackStore& residuals);

  // grad <- average over ranks of what each rank sent for tensor `name` at
  // training step `step`. Every rank calls it for the same tensors in the
  // same order. A NaN or inf in grad throws NonFiniteError naming the rank,
  // the step, the tensor and the bucket, before any codec state changes (no
  // residual takes it in), whatever the codec.
  ExchangeStats exchange(Transport& t, std::string_view name, std::span<float> grad, std::uint64_t step);

  // The same for a bucket of adjacent tensors in one collective: `grad` is
  // their concatenation, `pieces` name them in order. dct and topk still
  // select per tensor (DCT-DP's per-layer threshold, a residual per tensor)
  // and send one sparse stream for the bucket, so fusing saves messages
  // without changing what is selected; the quantized codecs and none treat
  // the bucket as one tensor named `name`.
  struct Piece {
    std::string name;
    std::size_t size;
  };
  ExchangeStats exchange(Transport& t, std::string_view name, std::span<const Piece> pieces, std::span<float> grad,
                         std::uint64_t step);

  // dct / topk with this step's pairs selected (and their values rounded to
  // the codec's format) elsewhere, a GPU rank's kernels in sparq.torch: the
  // sparse allreduce of `sent` (this rank's pairs of the bucket `name`) into
  // `sum`, under the plan `auto` keeps for name.
  CollStats allreduce_pairs(Transport& t, std::string_view name, const compress::SparseStream& sent,
                            compress::SparseStream& sum);

  // One tensor's codec state, for selections made elsewhere (sparq.torch's
  // codecs on a GPU keep residuals and thresholds there and hand them over
  // to be saved, or take them back after a load): the residual (empty if
  // none) and DCT-DP's threshold (none before its first step).
  struct TensorState {
    std::span<const float> residual;
    std::optional<float> tau;
  };
  TensorState tensor_state(std::string_view name) const;
  // Replaces it; a residual of another size than the stored one, or a
  // threshold for a codec without one, is an InputError.
  void set_tensor_state(std::string_view name, std::span<const float> residual, std::optional<float> tau);

  // The codec's state on this rank, bit for bit: the residuals, DCT-DP's
  // thresholds and schedule, auto's plans. load_state() of a blob saved by an
  // exchange with the same codec continues exactly where it left off; another
  // codec, or a corrupt blob, is an InputError.
  std::vector<std::byte> save_state() const;
  void load_state(std::span<const std::byte> blob);
  // The state of rank `rank` of `ranks` (fewer than saved.size()) made from
  // what every rank of a larger run saved: rank r's own, with the residuals
  // of the saved ranks r + ranks, r + 2 ranks, ... added to its residuals
  // (so they sum to what the saved ranks' summed, one float addition a
  // folded rank apart), its DCT-DP thresholds and schedule kept, and auto's
  // plans started afresh (they are every rank's alike only when each starts
  // from nothing).
  static std::vector<std::byte> repartition_state(std::span<const std::vector<std::byte>> saved, std::size_t rank,
                                                  std::size_t ranks);

 private:
  // dct / topk: this step's pairs of one tensor into `out` (fp32 values;
  // residual updated), returns how many.
  std::size_t select(std::string_view name, std::span<const float> grad, std::uint64_t step,
                     compress::SparseStream& out);
  // stream_ <- the pieces' selections, each shifted to its offset in the bucket.
  std::size_t select_bucket(std::span<const Piece> pieces, std::span<const float> grad, std::uint64_t step);
  // Rounds a bucket's selected pairs to the codec's value format (+bf16,
  // +fp8, +fp4: one scale for the whole message) and returns what rounding
  // took from each value, in the stream's order, for the residuals of the
  // tensors they came from, into `taken` (empty with fp32 values).
  void round_selected(compress::SparseStream& sent, std::vector<float>& taken);

  DpCodec codec_;
  compress::ErrorFeedbackStore& residuals_;
  std::optional<compress::DctDp> dct_;
  // auto's plan per exchanged name. Like the residuals, this is state of the
  // codec (saved by save_state()).
  std::map<std::string, SparseAutoHistory, std::less<>> auto_history_;
  compress::SparseStream stream_, sum_, piece_;
  std::vector<std::uint32_t> idx_, bucket_idx_;
  std::vector<float> val_, bucket_val_, round_err_, taken_;
};

// Throws NonFiniteError for the first NaN or inf of a bucket's gradient:
// "rank R, step K: the gradient of 'TENSOR' (bucket 'B') holds nan at I of N"
// (I within the tensor).
void check_gradients(int rank, std::string_view bucket, std::span<const GradExchange::Piece> pieces,
                     std::span<const float> grad, std::uint64_t step);

}  // namespace sparq
