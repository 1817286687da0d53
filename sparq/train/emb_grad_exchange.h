#pragma once
// Replicated embedding tables: each rank's gradient of a table is row-sparse
// (only the rows its batch looked up), so the ranks exchange it with the
// row-sparse allreduce (SparCML's recursive doubling with a row as the unit,
// coll/row_sparse_allreduce.h) instead of a dense allreduce of the table.
// Tables of one width travel as one matrix (their rows stacked), so a step
// costs one collective's latency, not one per table. Its compression ratio
// is against an fp32 allgather of every rank's touched rows
// (row_sparse_allgather_bytes), the plain way to exchange them.
#include <span>

#include "sparq/compress/stream_size.h"
#include "sparq/model/dlrm.h"
#include "sparq/train/grad_exchange.h"

namespace sparq {

// One table of an exchange: its gradient (rows any rank touched, ascending;
// may be empty) and its shape.
struct EmbGradRef {
  SparseGrad<float>* grad;
  std::size_t rows, dim;
};

// Every table's gradient <- the average over ranks of every rank's gradient
// of it (a row any rank touched stays, even where the sum is zero). All
// ranks pass the same tables in the same order. Consecutive tables of one
// width go together, up to 2^32 rows (a larger single table is an
// InputError). A NaN or inf in a gradient throws NonFiniteError naming the
// rank, `step` and the table (its index in `tables`) before anything is sent.
// `values`: the wire's value format (bf16: sums rounded as
// row_sparse_allreduce rounds them), the same on every rank.
ExchangeStats exchange_embedding_grads(Transport& t, std::span<const EmbGradRef> tables, std::uint64_t step,
                                       compress::ValueFormat values = compress::ValueFormat::F32);

// Every table of a model, in one exchange.
std::vector<EmbGradRef> embedding_grads(Dlrm<float>& model);

}  // namespace sparq
