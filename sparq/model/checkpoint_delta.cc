// Deltas: the rows changed since the point a delta follows (checkpoint.h).
#include "sparq/model/checkpoint_delta.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "sparq/core/error.h"
#include "sparq/model/checkpoint.h"
#include "sparq/model/checkpoint_io.h"

namespace sparq {

using namespace ckpt;
namespace fs = std::filesystem;

namespace {
// More links than any run writes between two whole checkpoints: a longer
// chain is a damaged or crafted one.
constexpr std::size_t kMaxChain = 1 << 16;

void put_delta(Out& o, const Header& h, const CheckpointDelta& d) {
  put_header(o, kMagicDelta, h);
  o.floats(d.dense);
  o.u64(d.tables.size());
  for (const auto& t : d.tables) {
    o.u64(t.rows);
    o.u64(t.dim);
    o.u64(t.ids.size());
    o.bytes(t.ids.data(), t.ids.size() * sizeof(std::uint32_t));
    o.bytes(t.values.data(), t.values.size() * sizeof(float));
  }
  o.u64((d.row_state ? d.tables.size() : 0) + d.dense_states.size());
  if (d.row_state)
    for (const auto& t : d.tables) o.floats(t.state);
  for (const auto& s : d.dense_states) o.floats(s);
  put_rank_states(o, d.rank_states);
  o.trailer();
}

// Table t's changed rows from the file: ascending, each < rows.
std::vector<std::uint32_t> read_rows(In& in, std::uint64_t rows, std::uint64_t dim) {
  const std::uint64_t k = in.u64();
  SPARQ_CHECK_AS(InputError, k <= rows && k * (sizeof(std::uint32_t) + dim * sizeof(float)) <= in.left(),
                 "'{}': truncated checkpoint ({} changed rows)", in.path, k);
  std::vector<std::uint32_t> ids(k);
  in.bytes(ids.data(), k * sizeof(std::uint32_t));
  for (std::size_t i = 0; i < k; ++i)
    SPARQ_CHECK_AS(InputError, ids[i] < rows && (i == 0 || ids[i - 1] < ids[i]),
                   "'{}': changed row {} out of order or range ({} rows)", in.path, ids[i], rows);
  return ids;
}

void read_tables(In& in, Dlrm<float>& model, std::vector<std::vector<std::uint32_t>>& ids) {
  const std::uint64_t nt = in.u64();
  SPARQ_CHECK_AS(InputError, nt == model.tables().size(), "'{}': {} tables, this model has {}", in.path, nt,
                 model.tables().size());
  std::vector<float> values;
  for (auto& t : model.tables()) {
    const std::uint64_t rows = in.u64(), dim = in.u64();
    SPARQ_CHECK_AS(InputError, rows == t.rows() && dim == t.dim(), "'{}': table of {} x {}, this model has {} x {}",
                   in.path, rows, dim, t.rows(), t.dim());
    ids.push_back(read_rows(in, rows, dim));
    if (!t.held()) {
      in.skip(ids.back().size() * dim * sizeof(float), "a table's rows");
      continue;
    }
    values.resize(ids.back().size() * dim);
    in.bytes(values.data(), values.size() * sizeof(float));
    for (std::size_t i = 0; i < ids.back().size(); ++i)
      std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(i * dim), dim, t.row(ids.back()[i]).begin());
  }
}

void read_states(In& in, Dlrm<float>& model, Optimizer<float>& opt, const std::vector<std::vector<std::uint32_t>>& ids) {
  const std::uint64_t ns = in.u64();
  SPARQ_CHECK_AS(InputError, ns == opt.state().size(),
                 "'{}': {} optimizer state vectors, this optimizer has {} (different --embedding-optimizer or "
                 "--optimizer?)",
                 in.path, ns, opt.state().size());
  std::vector<float> values;
  for (std::size_t i = 0; i < ns; ++i) {
    if (i >= opt.table_state().size()) {
      in.floats(opt.state()[i], "optimizer state");
      continue;
    }
    values.resize(ids[i].size());
    if (!model.tables()[i].held()) {
      in.skip_floats(values.size(), "optimizer state");
      continue;
    }
    in.floats(values, "a table's optimizer state");
    for (std::size_t j = 0; j < values.size(); ++j) opt.state()[i][ids[i][j]] = values[j];
  }
}
}  // namespace

CheckpointSnapshot snapshot_memory(const Dlrm<float>& model) {
  CheckpointSnapshot s;
  for (const auto& t : model.tables()) {
    s.tables.push_back({t.rows(), t.dim(), make_random_access<float>(t.rows() * t.dim())});
    std::fill_n(s.tables.back().values.get(), t.rows() * t.dim(), 0.0f);  // its pages faulted in here
  }
  return s;
}

void take_snapshot(CheckpointSnapshot& s, const Dlrm<float>& model, Optimizer<float>& opt, const std::string& meta,
                   std::span<const std::vector<std::byte>> rank_states) {
  const auto dense = model.dense().params();
  s.dense.assign(dense.begin(), dense.end());
  s.tables.resize(model.tables().size());
  for (std::size_t i = 0; i < s.tables.size(); ++i) {
    const auto& t = model.tables()[i];
    SPARQ_CHECK(t.held(), "a checkpoint needs every table: gather them first");
    auto& w = s.tables[i];
    if (!w.values || w.rows != t.rows() || w.dim != t.dim())
      w = {t.rows(), t.dim(), make_random_access<float>(t.weights().size())};
    std::copy(t.weights().begin(), t.weights().end(), w.values.get());
  }
  s.states = opt.state();
  s.table_states = opt.table_state().size();
  s.rank_states.assign(rank_states.begin(), rank_states.end());
  s.meta = meta;
}

void take_checkpoint_delta(CheckpointDelta& d, const Dlrm<float>& model, Optimizer<float>& opt,
                           const std::string& meta, std::span<const std::vector<std::byte>> rank_states) {
  const auto dense = model.dense().params();
  d.dense.assign(dense.begin(), dense.end());
  d.row_state = !opt.table_state().empty();
  d.tables.resize(model.tables().size());
  for (std::size_t t = 0; t < d.tables.size(); ++t) {
    const auto& tb = model.tables()[t];
    SPARQ_CHECK(tb.held(), "a checkpoint needs every table: gather them first");
    auto& r = d.tables[t];
    r.rows = tb.rows(), r.dim = tb.dim();
    opt.take_changed_rows(t, r.ids);
    r.values.resize(r.ids.size() * tb.dim());
    r.state.clear();
    for (std::size_t i = 0; i < r.ids.size(); ++i) {
      // Random rows: keep misses in flight, as the optimizer's updates do.
      if (i + EmbeddingBag<float>::kPrefetchAhead < r.ids.size()) tb.prefetch(r.ids[i + EmbeddingBag<float>::kPrefetchAhead]);
      std::copy_n(tb.weights().begin() + static_cast<std::ptrdiff_t>(r.ids[i] * tb.dim()), tb.dim(),
                  r.values.begin() + static_cast<std::ptrdiff_t>(i * tb.dim()));
      if (d.row_state) r.state.push_back(opt.table_state()[t][r.ids[i]]);
    }
  }
  d.dense_states.resize(opt.dense_state().size());
  std::copy(opt.dense_state().begin(), opt.dense_state().end(), d.dense_states.begin());
  d.rank_states.assign(rank_states.begin(), rank_states.end());
  d.meta = meta;
}

void advance(CheckpointSnapshot& s, CheckpointDelta& d) {
  SPARQ_CHECK(d.tables.size() == s.tables.size() && d.dense.size() == s.dense.size() &&
                  d.row_state == (s.table_states > 0) && s.states.size() == s.table_states + d.dense_states.size(),
              "a delta of another model");
  // The dense part and its optimizer state change whole at every step:
  // swapped in, not copied (the delta's next take overwrites what it gets).
  s.dense.swap(d.dense);
  for (std::size_t i = 0; i < d.dense_states.size(); ++i) s.states[s.table_states + i].swap(d.dense_states[i]);
  for (std::size_t t = 0; t < d.tables.size(); ++t) {
    const auto& r = d.tables[t];
    auto& w = s.tables[t];
    for (std::size_t i = 0; i < r.ids.size(); ++i) {
      if (i + EmbeddingBag<float>::kPrefetchAhead < r.ids.size())
        __builtin_prefetch(w.values.get() + r.ids[i + EmbeddingBag<float>::kPrefetchAhead] * w.dim, 1);
      std::copy_n(r.values.begin() + static_cast<std::ptrdiff_t>(i * w.dim), w.dim, w.values.get() + r.ids[i] * w.dim);
      if (d.row_state) s.states[t][r.ids[i]] = r.state[i];
    }
  }
  s.rank_states.swap(d.rank_states);
  s.meta.swap(d.meta);
}

Written save_delta(const std::string& path, const std::string& prev, std::uint32_t prev_crc, const CheckpointDelta& d) {
  const fs::path dir = fs::path(path).parent_path();
  const Header h{fs::path(prev).lexically_relative(dir.empty() ? fs::path(".") : dir).string(), prev_crc, d.meta};
  return write_atomic(path, [&](Out& o) { put_delta(o, h, d); });
}

std::vector<std::string> checkpoint_chain(const std::string& path) {
  std::vector<std::string> chain;
  std::optional<std::uint32_t> expect;  // the CRC the last delta keeps of the point it follows
  for (std::string at = path;;) {
    if (expect)
      SPARQ_CHECK_AS(InputError, fs::exists(at), "'{}' follows '{}', which is missing: the chain is broken there", chain.back(), at);
    In in(at);
    const File f = open_read(in);
    if (expect)
      SPARQ_CHECK_AS(InputError, in.crc == *expect,
                     "'{}' follows another '{}' than the one there now (written again since, by another run?)",
                     chain.back(), at);
    chain.push_back(at);
    if (in.layout != Layout::Delta) return chain;
    SPARQ_CHECK_AS(InputError, chain.size() <= kMaxChain, "'{}': a chain of more than {} deltas", path, kMaxChain);
    const Header h = read_header(in);
    expect = h.prev_crc;
    at = (fs::path(at).parent_path() / h.prev).string();
  }
}

std::string ckpt::load_delta(const std::string& path, Dlrm<float>& model, Optimizer<float>* opt,
                              std::vector<std::vector<std::byte>>* rank_states) {
  In in(path);
  const File f = open_read(in);
  SPARQ_CHECK_AS(InputError, in.layout == Layout::Delta, "'{}' is not a delta", path);
  std::string meta = read_header(in).meta;
  in.floats(model.dense().params(), "the dense buffer");
  std::vector<std::vector<std::uint32_t>> ids;
  read_tables(in, model, ids);
  if (opt == nullptr) return meta;
  read_states(in, model, *opt, ids);
  read_rank_states(in, rank_states);
  SPARQ_CHECK_AS(InputError, in.left() == 0, "'{}': {} bytes after the end of the checkpoint", path, in.left());
  return meta;
}

}  // namespace sparq
