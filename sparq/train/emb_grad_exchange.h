#pragma once
// Replicated embedding tables: each rank's gradient of a table is row-sparse
// (only the rows its batch looked up), so the ranks exchange it with the
// sparse allreduce (SparCML) instead of a dense allreduce of the table: the
// row gradients become a SparseStream over the table's rows x dim elements.
#include "sparq/coll/sparse_allreduce.h"
#include "sparq/model/embedding.h"
#include "sparq/train/grad_exchange.h"

namespace sparq {

// g <- the average over ranks of every rank's g for a table of rows x dim
// (rows any rank touched, ascending; g may be empty). Needs rows * dim < 2^32.
ExchangeStats exchange_embedding_grad(Transport& t, SparseGrad<float>& g, std::size_t rows, std::size_t dim,
                                      const SparseAllreduceOptions& opts = {});

}  // namespace sparq
