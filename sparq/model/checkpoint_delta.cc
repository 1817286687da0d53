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

void put_delta(Out& o, const Header& h, const Dlrm<float>& model, Optimizer<float>& opt,
               std::span<const std::vector<std::uint32_t>> changed, std::span<const std::vector<std::byte>> rank_states) {
  put_header(o, kMagicDelta, h);
  o.floats(model.dense().params());
  o.u64(model.tables().size());
  std::vector<float> values;
  for (std::size_t t = 0; t < model.tables().size(); ++t) {
    const auto& tb = model.tables()[t];
    SPARQ_CHECK(tb.held(), "a checkpoint needs every table: gather them first");
    const auto& rows = changed[t];
    o.u64(tb.rows());
    o.u64(tb.dim());
    o.u64(rows.size());
    o.bytes(rows.data(), rows.size() * sizeof(std::uint32_t));
    values.clear();
    for (const std::uint32_t r : rows)
      values.insert(values.end(), tb.weights().begin() + static_cast<std::ptrdiff_t>(r * tb.dim()),
                    tb.weights().begin() + static_cast<std::ptrdiff_t>((r + 1) * tb.dim()));
    o.bytes(values.data(), values.size() * sizeof(float));
  }
  const auto state = opt.state();
  o.u64(state.size());
  for (std::size_t i = 0; i < state.size(); ++i) {
    if (i >= opt.table_state().size()) {
      o.floats(state[i]);
      continue;
    }
    values.clear();
    for (const std::uint32_t r : changed[i]) values.push_back(state[i][r]);
    o.floats(values);
  }
  put_rank_states(o, rank_states);
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

CheckpointImage delta_checkpoint_image(const std::string& path, const std::string& prev, std::uint32_t prev_crc,
                                       const Dlrm<float>& model, Optimizer<float>& opt,
                                       std::span<const std::vector<std::uint32_t>> changed, const std::string& meta,
                                       std::span<const std::vector<std::byte>> rank_states) {
  SPARQ_CHECK(changed.size() == model.tables().size(), "changed rows of {} tables for {}", changed.size(),
              model.tables().size());
  const Header h{fs::path(prev).lexically_relative(fs::path(path).parent_path()).string(), prev_crc, meta};
  CheckpointImage image;
  Out o(nullptr, &image.bytes, path);
  put_delta(o, h, model, opt, changed, rank_states);
  image.crc = o.crc;
  return image;
}

void write_checkpoint_image(const std::string& path, const CheckpointImage& image) {
  write_atomic(path, [&](Out& o) { o.bytes(image.bytes.data(), image.bytes.size()); });
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

std::string ckpt::apply_delta(const std::string& path, Dlrm<float>& model, Optimizer<float>* opt,
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
