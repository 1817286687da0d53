#pragma once
// Sparse allreduce (SparCML, Renggli et al., SC'19, section 5): the sum of
// one SparseStream per rank, of a common dimension N, identical on every rank.
// Message sizes are discovered on receipt; no rank knows the others' nnz.
//
// Algorithms (docs/algorithms.md has rounds, bytes and bounds):
//  - ssar-recursive-double: log2 P rounds exchanging the whole partial sum
//    with rank r ^ 2^t (non-powers of two folded first); latency-optimal.
//  - ssar-split-allgather: split N into P ranges, send each range of my
//    stream to its owner (non-blocking, all at once), owners sum, then a
//    sparse (concatenating) allgather of the reduced ranges.
//  - dsar-split-allgather: the same split, then the reduced range goes dense
//    and a dense ring allgather follows, optionally QSGD-quantized.
//  - dense: densify and run the dense allreduce (for comparison).
//  - values = Bf16, Fp8 or Fp4: every stream message (sparse, or a partial sum
//    that went dense) carries values in that format (a sender rounds its
//    own partial sum first, so partners still agree), and the result is
//    rounded to it on every rank; the dense phases (dsar's allgather,
//    `dense`) still send fp32, or QSGD where asked. The dense switch
//    follows the format: at v value bytes a stream stays sparse up to
//    N v / (1 + v) pairs (fp4: about 0.35 N; compress::sparse_capacity).
//  - auto: the cheapest of the four under an alpha-beta estimate (see
//    SparseAutoRule), dense unless a sparse one is more than 1% cheaper. All
//    ranks must choose alike: without a SparseAutoHistory that costs one
//    extra 8-byte allreduce (the max nnz) per call; with one, only on the
//    first call and after a dense result.
#include <optional>
#include <string_view>

#include "sparq/coll/call.h"
#include "sparq/compress/qsgd.h"
#include "sparq/compress/sparse_stream.h"
#include "sparq/compress/stream_codec.h"
#include "sparq/transport/net_model.h"

namespace sparq {

enum class SparseAlgo { Auto, SsarRecursiveDouble, SsarSplitAllgather, DsarSplitAllgather, Dense };
std::string_view sparse_algo_name(SparseAlgo a);
SparseAlgo parse_sparse_algo(std::string_view s);  // throws InputError

// `auto` estimates each algorithm's time in the alpha-beta model, each
// message costing what the encoder writes for its expected pairs
// (compress::sparse_encoded_size: index run, values in opts.values) or its
// dense encoding where smaller, with the result's fill-in predicted for
// independent uniformly random indices:
// the union of m sets of k indices out of N has N (1 - (1 - k/N)^m) entries,
// unless `result_density` (fraction of N) is given.
struct SparseAutoRule {
  NetModel net{20e-6, 8.0 / 10e9};      // 10 Gbit/s, 20 us
  std::optional<double> result_density;  // override of the fill-in estimate
};

// What `auto` keeps between calls on the same tensor: the previous result's
// nnz, which every rank holds alike, so a later call plans from it without
// the agreement round (a caller's density changes slowly from step to step;
// a stale plan only costs time: every algorithm's sum is identical on all
// ranks). Every rank must pass a history for the same calls.
struct SparseAutoHistory {
  std::size_t dim = 0;
  int nranks = 0;
  std::size_t result_nnz = 0;  // 0: nothing to plan from (none yet, or the last result was dense)
};

struct SparseAllreduceOptions {
  SparseAlgo algo = SparseAlgo::Auto;
  int tag = tags::kSparseAllreduce;
  Millis timeout{0};
  // dsar-split-allgather (and auto's choice of it): QSGD for the dense phase.
  std::optional<compress::QsgdOptions> dense_qsgd;
  std::uint64_t step = 0, tensor = 0;  // QSGD randomness keys
  compress::ValueFormat values = compress::ValueFormat::F32;
  SparseAutoRule auto_rule{};
  SparseAutoHistory* history = nullptr;  // auto only; see SparseAutoHistory
};

// The per-algorithm time estimates behind `auto`, in seconds (for tests and
// the benchmark's report), for P ranks, dimension N and max local nnz k.
struct SparseCostEstimate {
  double recursive_double, split_allgather, dsar_split_allgather, dense;
};
SparseCostEstimate estimate_sparse_allreduce(const SparseAllreduceOptions& opts, std::size_t n, int nranks,
                                             std::size_t k_max);
SparseAlgo pick_sparse_algo(const SparseCostEstimate& e);

// out receives the sum: dense past sparse_capacity(N, opts.values) pairs, or
// where a message of it would have been smaller dense; otherwise sparse.
CollStats sparse_allreduce(Transport& t, const compress::SparseStream& in, compress::SparseStream& out,
                           const SparseAllreduceOptions& opts = {});

}  // namespace sparq
