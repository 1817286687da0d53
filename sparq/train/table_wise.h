#pragma once
// Table-wise embedding placement (DLRM's model parallelism for the tables):
// every table lives on one owner rank. Forward: each owner pools its tables
// for the whole global batch and an alltoall hands every rank the pooled
// vectors of its share (`emb_fwd`). Backward: every rank sends the gradients
// of those vectors back to the owners (`emb_bwd`), and each owner computes
// its tables' row-sparse gradient over the global batch. Both alltoalls may
// be quantized (--emb-codec-fwd / --emb-codec-bwd, Yang et al.).
//
// Block layout on the wire, from owner s to rank q: [tables of s][samples of
// q][dim], each table a run of its own (QuantizedAlltoallOptions::send_runs),
// so a quantization row covers consecutive samples of one table, whose values
// share a range, whatever q's share: a table's last row is shorter where its
// share x dim does not fill whole rows (an odd share at the default rows of
// two vectors). Rows carry an fp16 scale and bias: with rows of
// 32 values (2 vectors of 16) q4 sends 6.4x and q2 10.7x fewer bytes than
// fp32. Longer rows cost less header but widen each row's range: at 2 bits a
// row of 8 vectors rounds most small gradients to a level a third of the
// row's range away (docs/results.md measures both).
//
// Only the owner's copy of a table is trained; the other ranks' copies are
// stale until gather() brings them to one rank (tests, checkpoints).
#include <span>
#include <vector>

#include "sparq/coll/codec.h"
#include "sparq/coll/patterns.h"
#include "sparq/model/dlrm.h"
#include "sparq/model/optimizer.h"
#include "sparq/train/grad_exchange.h"

namespace sparq {

// Owner of each table: largest table first to the least-loaded rank (rows),
// ties to the lower table index and rank. Deterministic on every rank.
std::vector<int> assign_tables(std::span<const std::size_t> table_rows, int ranks);

class TableWise {
 public:
  // `model` must outlive this object. The codecs' rows are `row_len` values
  // with fp16 scales (their own row length and scale width are overridden).
  TableWise(Transport& t, Dlrm<float>& model, Codec fwd, Codec bwd, std::size_t row_len);

  const std::vector<int>& owners() const { return owner_; }

  // Pools this rank's tables over `global` (all ranks pass the same batch),
  // exchanges, and writes pooled [len x m x dim]: the lookups of all tables
  // for this rank's share (pattern::Partition{global.size, P}). `step`
  // keys a QSGD codec's rounding (every rank passes the same).
  ExchangeStats forward(const Batch& global, std::span<float> pooled, std::uint64_t step);

  // dpooled, len rows of m x dim (Dlrm::pooled_grad) of this rank's share,
  // -> the owners; sets model.sparse_grad(t) of every owned table to its
  // gradient over the global batch, averaged over ranks like the dense
  // gradients; the other tables' gradients are left empty.
  ExchangeStats backward(Dlrm<float>::PooledGrad dpooled, std::uint64_t step);

  // Sends every owned table (weights and row-wise Adagrad state) to `root`,
  // which then holds the whole model.
  void gather(int root, Optimizer<float>& opt);

 private:
  Transport& t_;
  Dlrm<float>& model_;
  Codec fwd_, bwd_;
  std::vector<int> owner_;
  std::vector<std::vector<std::size_t>> tables_of_;  // per rank, ascending
  const Batch* global_ = nullptr;                   // the batch of the last forward()
  std::vector<float> send_, recv_;
  std::vector<const float*> grad_rows_;  // backward: where each global sample's gradient landed
  std::vector<std::size_t> send_counts_, recv_counts_, send_runs_, recv_runs_;
};

}  // namespace sparq
