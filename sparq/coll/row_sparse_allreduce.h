#pragma once
// Row-sparse allreduce: the sum over ranks of one row-sparse matrix per rank
// (the rows it holds, ascending, `dim` values each), identical on every rank.
//
// SparCML's SSAR_Recursive_double (sparse_allreduce.h) with a row, not an
// element, as the unit of sparsity: log2 P rounds (a non-power of two folded
// first, pattern::Fold), in each a rank sends its partial sum to new rank
// r ^ 2^t and adds the one it receives, row by row. A row's index travels
// once for its `dim` values, and merging touches each row once, where the
// element streams index and merge every value (for embedding gradients,
// whose sparsity comes in whole rows; the row unit is sparq's, SparCML's
// streams index elements). Row sums are commutative, so every rank ends with
// the same bits. A row stays in the sum once any rank sent it, even if its
// values add up to zero.
//
// Message: [u64 n][u32 row x n][value x n*dim], each value an f32, or with
// compress::ValueFormat::Bf16 a bfloat16 (sparq's extension, not SparCML's: half the
// value bytes of replicated tables' gradients). In bf16 a rank rounds its
// matrix to nearest even before each send and keeps the rounded values, so
// both ranks of a round add the same two numbers and every rank still ends
// with the same bits; the error is a rounding of each partial sum, log2 P
// times at most (a folded rank, P not a power of two, gets the sum back in
// f32). A message that does not parse exactly, or whose rows are
// not ascending or not below `rows`, is a WireError naming the sender.
#include <cstdint>
#include <vector>

#include "sparq/coll/call.h"
#include "sparq/compress/stream_size.h"

namespace sparq {

struct RowSparse {
  std::vector<std::uint32_t> rows;  // ascending
  std::vector<float> values;        // rows.size() x dim, row-major
};

// io <- the sum over ranks of every rank's io. `rows` (the matrix's height,
// at most 2^32) and `dim` must be the same on every rank; io's rows must be
// ascending and below `rows`, io.values hold rows.size() x dim values
// (InputError otherwise). `values`: the wire's value format, F32 or Bf16
// (InputError otherwise), the same on every rank.
CollStats row_sparse_allreduce(Transport& t, RowSparse& io, std::size_t rows, std::size_t dim,
                               compress::ValueFormat values = compress::ValueFormat::F32,
                               int tag = tags::kRowSparseAllreduce, Millis timeout = Millis{0});

}  // namespace sparq
