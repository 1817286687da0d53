#include "sparq/train/emb_grad_exchange.h"

namespace sparq {

ExchangeStats exchange_embedding_grad(Transport& t, SparseGrad<float>& g, std::size_t rows, std::size_t dim,
                                      const SparseAllreduceOptions& opts) {
  const std::size_t n = rows * dim;
  SPARQ_CHECK(g.rows.empty() || g.dim == dim, "embedding gradient of width {} for a table of width {}", g.dim, dim);
  g.dim = dim;
  SPARQ_CHECK_AS(InputError, dim > 0 && n < (std::size_t{1} << 32),
                 "embedding gradient of {} rows x {} does not fit a sparse stream", rows, dim);
  SPARQ_CHECK(g.values.size() == g.rows.size() * dim, "embedding gradient: {} values for {} rows of {}",
              g.values.size(), g.rows.size(), dim);
  const auto t0 = Clock::now();
  std::vector<std::uint32_t> idx(g.values.size());
  for (std::size_t i = 0; i < g.rows.size(); ++i) {
    SPARQ_CHECK(g.rows[i] < rows && (i == 0 || g.rows[i - 1] < g.rows[i]), "embedding gradient rows not sorted/in range");
    for (std::size_t j = 0; j < dim; ++j) idx[i * dim + j] = static_cast<std::uint32_t>(g.rows[i] * dim + j);
  }
  const auto in = compress::SparseStream::sparse(n, std::move(idx), g.values);
  compress::SparseStream sum;
  const CollStats cs = sparse_allreduce(t, in, sum, opts);
  // Back to rows: every row with an entry (sparse) or every row (dense result).
  const float inv_p = 1.0f / static_cast<float>(t.size());
  g.rows.clear();
  g.values.clear();
  if (sum.is_dense()) {
    const auto v = sum.values();
    for (std::size_t r = 0; r < rows; ++r) {
      bool any = false;
      for (std::size_t j = 0; j < dim && !any; ++j) any = v[r * dim + j] != 0.0f;
      if (!any) continue;
      g.rows.push_back(static_cast<std::uint32_t>(r));
      for (std::size_t j = 0; j < dim; ++j) g.values.push_back(v[r * dim + j] * inv_p);
    }
  } else {
    const auto idxs = sum.indices();
    const auto vals = sum.values();
    for (std::size_t i = 0; i < idxs.size(); ++i) {
      const std::uint32_t r = static_cast<std::uint32_t>(idxs[i] / dim);
      if (g.rows.empty() || g.rows.back() != r) {
        g.rows.push_back(r);
        g.values.resize(g.values.size() + dim, 0.0f);
      }
      g.values[(g.rows.size() - 1) * dim + idxs[i] % dim] = vals[i] * inv_p;
    }
  }
  ExchangeStats st;
  st.bytes_sent = cs.wire.bytes_sent;
  st.dense_bytes = dense_ring_bytes(t.size(), n);
  st.comm_seconds = seconds_since(t0);
  st.wait_seconds = st.comm_seconds;
  st.kept = in.nnz();
  st.values = n;
  return st;
}

}  // namespace sparq
