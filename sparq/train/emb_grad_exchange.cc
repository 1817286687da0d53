#include "sparq/train/emb_grad_exchange.h"

#include <algorithm>

namespace sparq {

namespace {

constexpr std::size_t kStreamLimit = std::size_t{1} << 32;  // uint32 stream indices

// One sparse allreduce of these tables, laid out side by side.
ExchangeStats exchange_group(Transport& t, std::span<const EmbGradRef> tables, const SparseAllreduceOptions& opts) {
  const auto t0 = Clock::now();
  std::size_t n = 0, nnz = 0;
  ExchangeStats st;
  for (const EmbGradRef& e : tables) {
    SparseGrad<float>& g = *e.grad;
    SPARQ_CHECK(g.rows.empty() || g.dim == e.dim, "embedding gradient of width {} for a table of width {}", g.dim,
                e.dim);
    g.dim = e.dim;
    SPARQ_CHECK(g.values.size() == g.rows.size() * e.dim, "embedding gradient: {} values for {} rows of {}",
                g.values.size(), g.rows.size(), e.dim);
    n += e.rows * e.dim;
    nnz += g.values.size();
    st.dense_bytes += row_sparse_allgather_bytes(t.size(), g.rows.size(), e.dim);
  }
  // Element indices, a row's d of them consecutive (written in place: this
  // runs every step on 26 x B rows).
  std::vector<std::uint32_t> idx(nnz);
  std::vector<float> val(nnz);
  std::uint32_t* ip = idx.data();
  float* vp = val.data();
  std::size_t base = 0;
  for (const EmbGradRef& e : tables) {
    const SparseGrad<float>& g = *e.grad;
    for (std::size_t i = 0; i < g.rows.size(); ++i) {
      SPARQ_CHECK(g.rows[i] < e.rows && (i == 0 || g.rows[i - 1] < g.rows[i]),
                  "embedding gradient rows not sorted/in range");
      const auto first = static_cast<std::uint32_t>(base + g.rows[i] * e.dim);
      for (std::size_t j = 0; j < e.dim; ++j) *ip++ = first + static_cast<std::uint32_t>(j);
    }
    vp = std::copy(g.values.begin(), g.values.end(), vp);
    base += e.rows * e.dim;
  }
  const auto in = compress::SparseStream::sparse(n, std::move(idx), std::move(val));
  compress::SparseStream sum;
  const CollStats cs = sparse_allreduce(t, in, sum, opts);
  // Back to rows: every row with an entry (sparse) or with a non-zero value (dense result).
  const float inv_p = 1.0f / static_cast<float>(t.size());
  base = 0;
  const auto sidx = sum.indices();
  const auto sval = sum.values();
  std::size_t k = 0;  // next entry of a sparse result
  for (const EmbGradRef& e : tables) {
    SparseGrad<float>& g = *e.grad;
    const std::size_t d = e.dim, end = base + e.rows * d;
    g.rows.clear();
    g.values.clear();
    if (sum.is_dense()) {
      for (std::size_t r = 0; r < e.rows; ++r) {
        const float* v = sval.data() + base + r * d;
        bool any = false;
        for (std::size_t j = 0; j < d && !any; ++j) any = v[j] != 0.0f;
        if (!any) continue;
        g.rows.push_back(static_cast<std::uint32_t>(r));
        for (std::size_t j = 0; j < d; ++j) g.values.push_back(v[j] * inv_p);
      }
    } else {
      // The sum's entries of one row are consecutive: one division a row.
      while (k < sidx.size() && sidx[k] < end) {
        const std::size_t r = (sidx[k] - base) / d, row0 = base + r * d;
        g.rows.push_back(static_cast<std::uint32_t>(r));
        const std::size_t off = g.values.size();
        g.values.resize(off + d, 0.0f);
        for (; k < sidx.size() && sidx[k] < row0 + d; ++k) g.values[off + (sidx[k] - row0)] = sval[k] * inv_p;
      }
    }
    base = end;
  }
  st.bytes_sent = cs.wire.bytes_sent;
  st.comm_seconds = seconds_since(t0);
  st.wait_seconds = st.comm_seconds;
  st.kept = in.nnz();
  st.values = n;
  return st;
}

}  // namespace

ExchangeStats exchange_embedding_grads(Transport& t, std::span<const EmbGradRef> tables,
                                       const SparseAllreduceOptions& opts) {
  ExchangeStats st;
  std::size_t first = 0, n = 0;
  for (std::size_t i = 0; i <= tables.size(); ++i) {
    const std::size_t ni = i < tables.size() ? tables[i].rows * tables[i].dim : 0;
    if (i < tables.size())
      SPARQ_CHECK_AS(InputError, tables[i].dim > 0 && ni < kStreamLimit,
                     "embedding gradient of {} rows x {} does not fit a sparse stream", tables[i].rows, tables[i].dim);
    if (i == tables.size() || n + ni >= kStreamLimit) {  // close the group [first, i)
      if (i > first) st += exchange_group(t, tables.subspan(first, i - first), opts);
      first = i;
      n = 0;
    }
    n += ni;
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
