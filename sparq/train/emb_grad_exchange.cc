#include "sparq/train/emb_grad_exchange.h"

#include <algorithm>

#include "sparq/coll/row_sparse_allreduce.h"
#include "sparq/core/finite.h"
#include "sparq/core/kernel_costs.h"

namespace sparq {

namespace {

constexpr std::size_t kMaxRows = std::size_t{1} << 32;  // uint32 row indices

// One row-sparse allreduce of these tables (all of one width), their rows
// stacked: table i's row r is row base_i + r of the sum.
ExchangeStats exchange_group(Transport& t, std::span<const EmbGradRef> tables, compress::ValueFormat values) {
  const auto t0 = Clock::now();
  const std::size_t dim = tables.front().dim;
  std::size_t rows = 0, nnz = 0;
  ExchangeStats st;
  for (const EmbGradRef& e : tables) {
    SparseGrad<float>& g = *e.grad;
    SPARQ_CHECK(g.rows.empty() || g.dim == e.dim, "embedding gradient of width {} for a table of width {}", g.dim,
                e.dim);
    g.dim = e.dim;
    SPARQ_CHECK(g.values.size() == g.rows.size() * e.dim, "embedding gradient: {} values for {} rows of {}",
                g.values.size(), g.rows.size(), e.dim);
    rows += e.rows;
    nnz += g.values.size();
    st.dense_bytes += row_sparse_allgather_bytes(t.size(), g.rows.size(), e.dim);
  }
  RowSparse sum;
  std::size_t base = 0;
  {
    const ChargedKernel charged("emb_grad_stack_per_value", Units{nnz}, dim);
    sum.rows.reserve(nnz / dim);
    sum.values.reserve(nnz);
    for (const EmbGradRef& e : tables) {
      const SparseGrad<float>& g = *e.grad;
      for (std::uint32_t r : g.rows) {
        SPARQ_CHECK(r < e.rows, "embedding gradient row {} of a table of {}", r, e.rows);
        sum.rows.push_back(static_cast<std::uint32_t>(base + r));
      }
      sum.values.insert(sum.values.end(), g.values.begin(), g.values.end());
      base += e.rows;
    }
  }
  const CollStats cs = row_sparse_allreduce(t, sum, rows, dim, values);
  // Back to the tables, averaged.
  const ChargedKernel charged("emb_grad_unstack_per_value", Units{sum.values.size()}, dim);
  const float inv_p = 1.0f / static_cast<float>(t.size());
  base = 0;
  std::size_t k = 0;  // next row of the sum
  for (const EmbGradRef& e : tables) {
    SparseGrad<float>& g = *e.grad;
    const std::size_t first = k;
    while (k < sum.rows.size() && sum.rows[k] < base + e.rows) ++k;
    g.rows.resize(k - first);
    for (std::size_t i = first; i < k; ++i) g.rows[i - first] = static_cast<std::uint32_t>(sum.rows[i] - base);
    g.values.resize((k - first) * dim);
    for (std::size_t i = 0; i < g.values.size(); ++i) g.values[i] = sum.values[first * dim + i] * inv_p;
    base += e.rows;
  }
  st.bytes_sent = cs.wire.bytes_sent;
  st.comm_seconds = seconds_since(t0);
  st.wait_seconds = st.comm_seconds;
  st.kept = nnz;
  st.values = rows * dim;
  return st;
}

}  // namespace

ExchangeStats exchange_embedding_grads(Transport& t, std::span<const EmbGradRef> tables, std::uint64_t step,
                                       compress::ValueFormat values) {
  for (std::size_t i = 0; i < tables.size(); ++i)
    SPARQ_CHECK_FINITE(tables[i].grad->values, [&] {
      return fmt::format("rank {}, step {}: the gradient of table {} (emb_grad)", t.rank(), step, i);
    });
  ExchangeStats st;
  std::size_t first = 0, rows = 0;
  for (std::size_t i = 0; i <= tables.size(); ++i) {
    if (i < tables.size())
      SPARQ_CHECK_AS(InputError, tables[i].dim > 0 && tables[i].rows <= kMaxRows,
                     "embedding table of {} rows x {}: at most 2^32 rows of width > 0", tables[i].rows,
                     tables[i].dim);
    // Close the group [first, i) at the end, at a change of width, or before it outgrows uint32 rows.
    if (i == tables.size() || (i > first && (tables[i].dim != tables[first].dim || rows + tables[i].rows > kMaxRows))) {
      if (i > first) st += exchange_group(t, tables.subspan(first, i - first), values);
      first = i;
      rows = 0;
    }
    if (i < tables.size()) rows += tables[i].rows;
  }
  return st;
}

std::vector<EmbGradRef> embedding_grads(Dlrm<float>& model) {
  std::vector<EmbGradRef> refs;
  for (std::size_t tb = 0; tb < model.tables().size(); ++tb)
    refs.push_back({&model.sparse_grad(tb), model.tables()[tb].rows(), model.tables()[tb].dim()});
  return refs;
}

}  // namespace sparq
