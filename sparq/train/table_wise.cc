#include "sparq/train/table_wise.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "sparq/coll/quantized.h"
#include "sparq/core/finite.h"

namespace sparq {

std::vector<int> assign_tables(std::span<const std::size_t> table_rows, int ranks) {
  SPARQ_CHECK(ranks >= 1, "assign_tables: {} ranks", ranks);
  std::vector<std::size_t> order(table_rows.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return table_rows[a] > table_rows[b]; });
  std::vector<std::size_t> load(static_cast<std::size_t>(ranks), 0);
  std::vector<int> owner(table_rows.size());
  for (auto tb : order) {
    const auto least = std::min_element(load.begin(), load.end()) - load.begin();
    owner[tb] = static_cast<int>(least);
    load[static_cast<std::size_t>(least)] += table_rows[tb];
  }
  return owner;
}

TableWise::TableWise(Transport& t, Dlrm<float>& model, Codec fwd, Codec bwd, std::size_t row_len)
    : t_(t), model_(model), fwd_(fwd), bwd_(bwd) {
  SPARQ_CHECK_AS(InputError, row_len >= 1, "--emb-row-len must be >= 1");
  const auto& cfg = model.config();
  owner_ = assign_tables(cfg.table_rows, t.size());
  tables_of_.resize(static_cast<std::size_t>(t.size()));
  for (std::size_t tb = 0; tb < owner_.size(); ++tb) tables_of_[static_cast<std::size_t>(owner_[tb])].push_back(tb);
  fwd_.row_len = bwd_.row_len = row_len;
  fwd_.rowwise.scale = bwd_.rowwise.scale = compress::ScaleType::F16;
}

namespace {

// Embedding rows are short (16 floats by default) and a step moves tens of
// thousands of them one by one: a fixed-size copy becomes a few vector moves
// where a call to memmove costs more than the copy.
inline void copy_row(const float* in, std::size_t d, float* out) {
  if (d == 16)
    std::memcpy(out, in, 16 * sizeof(float));
  else
    std::copy_n(in, d, out);
}

// What one alltoall cost: counters, and the fp32 bytes of the same blocks.
ExchangeStats alltoall_stats(const CollStats& cs, std::span<const std::size_t> send_counts, int self, double secs) {
  ExchangeStats st;
  st.bytes_sent = cs.wire.bytes_sent;
  for (std::size_t q = 0; q < send_counts.size(); ++q)
    if (static_cast<int>(q) != self) st.dense_bytes += send_counts[q] * sizeof(float), st.kept += send_counts[q], st.values += send_counts[q];
  st.comm_seconds = secs;
  return st;
}
}  // namespace

ExchangeStats TableWise::forward(const Batch& global, std::span<float> pooled, std::uint64_t step) {
  const int p = t_.size(), r = t_.rank();
  const std::size_t d = model_.config().emb_dim, m = model_.config().num_tables(), G = global.size;
  const pattern::Partition shares{G, p};
  const auto& mine = tables_of_[static_cast<std::size_t>(r)];
  SPARQ_CHECK(global.sparse.size() == m, "batch has {} sparse features, model has {} tables", global.sparse.size(), m);
  SPARQ_CHECK(pooled.size() == shares.len(r) * m * d, "table-wise forward: {} pooled values for {} samples x {} x {}",
              pooled.size(), shares.len(r), m, d);
  global_ = &global;
  // Pool the owned tables over the global batch straight into the send
  // layout [q][table][sample of q][dim].
  send_counts_.assign(static_cast<std::size_t>(p), 0);
  recv_counts_.assign(static_cast<std::size_t>(p), 0);
  send_runs_.assign(static_cast<std::size_t>(p), mine.size());
  recv_runs_.resize(static_cast<std::size_t>(p));
  send_.resize(mine.size() * G * d);
  float* out = send_.data();
  for (int q = 0; q < p; ++q) {
    for (std::size_t i = 0; i < mine.size(); ++i, out += shares.len(q) * d) {
      model_.tables()[mine[i]].forward(global.sparse[mine[i]], G, shares.offset(q), shares.len(q), out, d);
      SPARQ_CHECK_FINITE(std::span<const float>(out, shares.len(q) * d), [&] {
        return fmt::format("rank {}, step {}: the lookup block of table {} for rank {} (emb_fwd)", r, step, mine[i], q);
      });
    }
    send_counts_[static_cast<std::size_t>(q)] = mine.size() * shares.len(q) * d;
    recv_counts_[static_cast<std::size_t>(q)] = tables_of_[static_cast<std::size_t>(q)].size() * shares.len(r) * d;
    recv_runs_[static_cast<std::size_t>(q)] = tables_of_[static_cast<std::size_t>(q)].size();
  }
  recv_.resize(shares.len(r) * m * d);
  const auto t0 = Clock::now();
  const CollStats cs = quantized_alltoallv(
      t_, send_, send_counts_, recv_, recv_counts_,
      {.codec = fwd_, .step = step, .stream = "emb_fwd", .send_runs = send_runs_, .recv_runs = recv_runs_});
  const ExchangeStats st = alltoall_stats(cs, send_counts_, r, seconds_since(t0));
  // recv block of owner s: [its tables][my samples][dim] -> pooled [sample][table][dim].
  const std::size_t len = shares.len(r);
  const float* in = recv_.data();
  for (int s = 0; s < p; ++s)
    for (std::size_t tb : tables_of_[static_cast<std::size_t>(s)])
      for (std::size_t b = 0; b < len; ++b, in += d) copy_row(in, d, pooled.data() + (b * m + tb) * d);
  return st;
}

ExchangeStats TableWise::backward(Dlrm<float>::PooledGrad dpooled, std::uint64_t step) {
  SPARQ_CHECK(global_ != nullptr, "table-wise backward() without a forward()");
  const int p = t_.size(), r = t_.rank();
  const std::size_t d = model_.config().emb_dim, m = model_.config().num_tables(), G = global_->size;
  const pattern::Partition shares{G, p};
  const std::size_t len = shares.len(r);
  SPARQ_CHECK(dpooled.rows == len && (len == 0 || dpooled.ld >= m * d),
              "table-wise backward: {} rows of stride {} for {} samples x {} x {}", dpooled.rows, dpooled.ld, len, m, d);
  const auto& mine = tables_of_[static_cast<std::size_t>(r)];
  // To owner s: [its tables][my samples][dim]; from rank q: [my tables][q's samples][dim].
  send_.resize(len * m * d);
  float* out = send_.data();
  for (int s = 0; s < p; ++s) {
    for (std::size_t tb : tables_of_[static_cast<std::size_t>(s)]) {
      const float* first = out;
      for (std::size_t b = 0; b < len; ++b, out += d) copy_row(dpooled.data + b * dpooled.ld + tb * d, d, out);
      SPARQ_CHECK_FINITE(std::span<const float>(first, len * d), [&] {
        return fmt::format("rank {}, step {}: the gradient of table {}'s lookups (emb_bwd)", r, step, tb);
      });
    }
    send_counts_[static_cast<std::size_t>(s)] = tables_of_[static_cast<std::size_t>(s)].size() * len * d;
    recv_counts_[static_cast<std::size_t>(s)] = mine.size() * shares.len(s) * d;
    send_runs_[static_cast<std::size_t>(s)] = tables_of_[static_cast<std::size_t>(s)].size();
    recv_runs_[static_cast<std::size_t>(s)] = mine.size();
  }
  recv_.resize(mine.size() * G * d);
  const auto t0 = Clock::now();
  const CollStats cs = quantized_alltoallv(
      t_, send_, send_counts_, recv_, recv_counts_,
      {.codec = bwd_, .step = step, .stream = "emb_bwd", .send_runs = send_runs_, .recv_runs = recv_runs_});
  const ExchangeStats st = alltoall_stats(cs, send_counts_, r, seconds_since(t0));
  for (std::size_t tb = 0; tb < m; ++tb) {
    auto& g = model_.sparse_grad(tb);
    g.rows.clear();
    g.values.clear();
  }
  // Every rank scaled its loss gradient so that the average over ranks is
  // the global mean (as for the dense gradients): the owner averages too.
  const float inv_p = 1.0f / static_cast<float>(p);
  // recv_ is [q][my table][q's sample][dim]: the tables read each sample's
  // gradient there.
  grad_rows_.resize(G);
  for (std::size_t i = 0; i < mine.size(); ++i) {
    const float* in = recv_.data();
    for (int q = 0; q < p; ++q) {
      const std::size_t len_q = shares.len(q);
      const float* block = in + i * len_q * d;
      for (std::size_t b = 0; b < len_q; ++b) grad_rows_[shares.offset(q) + b] = block + b * d;
      in += mine.size() * len_q * d;
    }
    auto& g = model_.sparse_grad(mine[i]);
    model_.tables()[mine[i]].backward(global_->sparse[mine[i]], G, grad_rows_, g);
    if (p > 1)
      for (float& v : g.values) v *= inv_p;
  }
  return st;
}

void TableWise::gather(int root, Optimizer<float>& opt) {
  const int r = t_.rank();
  Call c(t_, "table-wise gather", tags::kTableGather, Millis{0});
  std::vector<Request> reqs;
  const auto state = opt.table_state();
  for (std::size_t tb = 0; tb < owner_.size(); ++tb) {
    if (owner_[tb] == root || (r != root && r != owner_[tb])) continue;
    const auto w = model_.tables()[tb].weights();
    if (r == root) {
      reqs.push_back(c.irecv(owner_[tb], w));
      if (!state.empty()) reqs.push_back(c.irecv(owner_[tb], std::span<float>(state[tb])));
    } else {
      reqs.push_back(c.isend(root, std::span<const float>(w)));
      if (!state.empty()) reqs.push_back(c.isend(root, std::span<const float>(state[tb])));
    }
  }
  c.wait_all(reqs);
}

}  // namespace sparq
