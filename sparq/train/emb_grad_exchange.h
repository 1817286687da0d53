#pragma once
// Replicated embedding tables: each rank's gradient of a table is row-sparse
// (only the rows its batch looked up), so the ranks exchange it with the
// sparse allreduce (SparCML) instead of a dense allreduce of the table: the
// row gradients become a SparseStream over the table's rows x dim elements.
// Several tables travel as one stream (their element ranges side by side),
// so a step costs one collective's latency, not one per table. Its
// compression ratio is against an fp32 allgather of every rank's touched
// rows (row_sparse_allgather_bytes), the plain way to exchange them.
#include <span>

#include "sparq/coll/sparse_allreduce.h"
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
// of it. All ranks pass the same tables in the same order. Tables go
// together into streams of fewer than 2^32 elements (a larger single table
// is an InputError).
ExchangeStats exchange_embedding_grads(Transport& t, std::span<const EmbGradRef> tables,
                                       const SparseAllreduceOptions& opts = {});

// Every table of a model, in one exchange.
std::vector<EmbGradRef> embedding_grads(Dlrm<float>& model);

}  // namespace sparq
