// Incremental checkpoints: the rows an optimizer changed, deltas and their
// chains, and the background writer. A chain loads exactly as the whole
// checkpoint of the same point does.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "sparq/core/error.h"
#include "sparq/model/checkpoint.h"
#include "sparq/model/checkpoint_delta.h"
#include "sparq/model/checkpoint_writer.h"
#include "tests/model/tiny.h"

namespace sparq {
namespace {

namespace fs = std::filesystem;
using test::train;

fs::path temp_dir(const char* name) {
  const fs::path d = fs::temp_directory_path() / (std::string(name) + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// The message of the InputError `f` throws ("" if none).
template <class F>
std::string input_error(F f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

void expect_same(Dlrm<float>& a, Optimizer<float>& oa, Dlrm<float>& b, Optimizer<float>& ob) {
  EXPECT_EQ(std::memcmp(a.dense().params().data(), b.dense().params().data(), a.dense().size() * 4), 0);
  for (std::size_t t = 0; t < a.tables().size(); ++t)
    EXPECT_EQ(std::memcmp(a.tables()[t].weights().data(), b.tables()[t].weights().data(),
                          a.tables()[t].weights().size() * 4),
              0);
  EXPECT_EQ(oa.state(), ob.state());
}

std::vector<std::vector<std::uint32_t>> take_changed(Dlrm<float>& m, Optimizer<float>& o) {
  std::vector<std::vector<std::uint32_t>> rows;
  for (std::size_t t = 0; t < m.tables().size(); ++t) rows.push_back(o.take_changed_rows(t));
  return rows;
}

CheckpointDelta delta_of(Dlrm<float>& m, Optimizer<float>& o, const std::string& meta,
                         std::span<const std::vector<std::byte>> states) {
  CheckpointDelta d;
  take_checkpoint_delta(d, m, o, meta, states);
  return d;
}

// The reference: every id the steps' batches look up, by table.
TEST(ChangedRows, AreTheIdsTheStepsLookedUp) {
  Dlrm<float> m(test::tiny_config(), 1);
  Optimizer<float> o({.lr = 0.05, .track_changes = true}, m);
  std::vector<std::vector<float>> before;
  for (const auto& t : m.tables()) before.emplace_back(t.weights().begin(), t.weights().end());
  train(m, o, 2, 10);
  for (std::size_t t = 0; t < m.tables().size(); ++t) {
    std::set<std::uint32_t> ids;
    for (std::uint64_t s : {10, 11}) {
      const Batch b = test::tiny_batch(s);
      ids.insert(b.sparse[t].indices.begin(), b.sparse[t].indices.end());
    }
    const auto got = o.take_changed_rows(t);
    EXPECT_EQ(got, std::vector<std::uint32_t>(ids.begin(), ids.end())) << "table " << t;
    // Every row whose weights differ is among them.
    const std::size_t d = m.tables()[t].dim();
    for (std::uint32_t r = 0; r < m.tables()[t].rows(); ++r)
      if (std::memcmp(before[t].data() + r * d, m.tables()[t].row(r).data(), d * 4) != 0) {
        EXPECT_TRUE(ids.contains(r)) << "table " << t << " row " << r;
      }
    EXPECT_TRUE(o.take_changed_rows(t).empty());  // taken: counted afresh
  }
}

TEST(CheckpointDelta, ChainLoadsAsTheWholeCheckpoint) {
  const fs::path d = temp_dir("sparq_delta_");
  const std::vector<std::vector<std::byte>> states = {{std::byte{4}}, {std::byte{5}, std::byte{6}}};
  for (auto [eo, dense] : {std::pair{EmbeddingOptim::Sgd, DenseOptim::Sgd},
                           std::pair{EmbeddingOptim::RowwiseAdagrad, DenseOptim::Adam}}) {
    const OptimizerOptions oo{.lr = 0.05, .embedding = eo, .dense = dense, .track_changes = true};
    Dlrm<float> a(test::tiny_config(), 1);
    Optimizer<float> oa(oo, a);
    train(a, oa, 2, 0);
    take_changed(a, oa);
    const std::string w = d / "0", d1 = d / "1", d2 = d / "2";
    CheckpointSnapshot snap = snapshot_memory(a);
    take_snapshot(snap, a, oa, "{\"step\": 2}", {});
    const auto ww = save_checkpoint(w, snap);
    train(a, oa, 1, 2);
    CheckpointDelta delta1 = delta_of(a, oa, "{\"step\": 3}", {});
    const auto w1 = save_delta(d1, w, ww.crc, delta1);
    EXPECT_LT(w1.bytes, ww.bytes);
    EXPECT_EQ(fs::file_size(d1), w1.bytes);
    advance(snap, delta1);
    train(a, oa, 1, 3);
    CheckpointDelta delta2 = delta_of(a, oa, "{\"step\": 4}", states);
    save_delta(d2, d1, w1.crc, delta2);
    advance(snap, delta2);
    save_checkpoint(d / "snap", snap);  // the snapshot moved on by both deltas is the model
    save_checkpoint(d / "whole", a, oa, "{\"step\": 4}", states);
    EXPECT_EQ(checkpoint_chain(d2), (std::vector<std::string>{d2, d1, w}));

    Dlrm<float> b(test::tiny_config(), 99), c(test::tiny_config(), 98);
    Optimizer<float> ob(oo, b), oc(oo, c);
    std::vector<std::vector<std::byte>> sb, sc;
    EXPECT_EQ(load_checkpoint(d2, b, &ob, &sb), "{\"step\": 4}");
    EXPECT_EQ(load_checkpoint(d / "whole", c, &oc, &sc), "{\"step\": 4}");
    expect_same(b, ob, c, oc);
    expect_same(a, oa, b, ob);
    EXPECT_EQ(sb, states);
    Dlrm<float> e(test::tiny_config(), 97);
    Optimizer<float> oe(oo, e);
    EXPECT_EQ(load_checkpoint(d / "snap", e, &oe), "{\"step\": 4}");
    expect_same(a, oa, e, oe);
    EXPECT_EQ(read_checkpoint_meta(d2), "{\"step\": 4}");
  }
  fs::remove_all(d);
}

TEST(CheckpointDelta, BrokenChainsAreRefusedNamingTheLink) {
  const fs::path d = temp_dir("sparq_delta_bad_");
  const OptimizerOptions oo{.lr = 0.05, .track_changes = true};
  Dlrm<float> a(test::tiny_config(), 1);
  Optimizer<float> oa(oo, a);
  const std::string w = d / "0", d1 = d / "1", d2 = d / "2";
  CheckpointSnapshot snap;
  take_snapshot(snap, a, oa, "{}", {});
  const auto ww = save_checkpoint(w, snap);
  train(a, oa, 1, 0);
  const auto w1 = save_delta(d1, w, ww.crc, delta_of(a, oa, "{}", {}));
  train(a, oa, 1, 1);
  save_delta(d2, d1, w1.crc, delta_of(a, oa, "{}", {}));
  Dlrm<float> b(test::tiny_config(), 2);
  Optimizer<float> ob(oo, b);

  fs::rename(d1, d / "moved");  // a gap
  EXPECT_TRUE(input_error([&] { load_checkpoint(d2, b, &ob); })
                  .starts_with(fmt::format("'{}' follows '{}', which is missing: the chain is broken there", d2, d1)));
  // Another file in the link's place (written again by another run).
  train(a, oa, 1, 2);
  save_delta(d1, w, ww.crc, delta_of(a, oa, "{}", {}));
  EXPECT_NE(input_error([&] { checkpoint_chain(d2); }).find("follows another '" + d1 + "'"), std::string::npos);
  // A model of another configuration.
  DlrmConfig other = test::tiny_config();
  other.table_rows[1] = 6;
  Dlrm<float> c(other, 1);
  Optimizer<float> oc(oo, c);
  EXPECT_NE(input_error([&] { load_checkpoint(d1, c, &oc); }), "");
  // A link that names a pipe (found by fuzzing: the read blocked): refused.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const std::string pipe_path = "/proc/self/fd/" + std::to_string(fds[0]);
  save_delta(d / "p", pipe_path, 0, delta_of(a, oa, "{}", {}));
  EXPECT_NE(input_error([&] { load_checkpoint(d / "p", b, &ob); }).find("is not a regular file"), std::string::npos);
  ::close(fds[0]), ::close(fds[1]);
  // A flipped byte.
  std::string file;
  {
    std::ifstream in(d1, std::ios::binary);
    file.assign(std::istreambuf_iterator<char>(in), {});
  }
  file[file.size() / 2] ^= 1;
  std::ofstream(d1, std::ios::binary) << file;
  EXPECT_NE(input_error([&] { load_checkpoint(d1, b, &ob); }).find("checksum mismatch"), std::string::npos);
  fs::remove_all(d);
}

// The first point is whole, the next deltas; a failed write is rethrown by
// the next wait() and the point after it is whole again.
TEST(CheckpointWriter, WritesBehindAndReportsItsErrors) {
  const fs::path d = temp_dir("sparq_writer_");
  const OptimizerOptions oo{.lr = 0.05, .embedding = EmbeddingOptim::RowwiseAdagrad, .track_changes = true};
  Dlrm<float> a(test::tiny_config(), 1);
  Optimizer<float> oa(oo, a);
  CheckpointWriter writer;
  EXPECT_EQ(writer.save(d / "0", a, oa, "{}", {}, false).prev, "");
  train(a, oa, 1, 0);
  const auto s1 = writer.save(d / "1", a, oa, "{\"step\": 1}", {}, false);
  EXPECT_EQ(s1.prev, (d / "0").string());
  EXPECT_GT(s1.changed, 0u);
  EXPECT_LT(s1.changed, s1.rows);
  train(a, oa, 1, 1);  // while "1" may still be on its way
  const auto s2 = writer.save(d / "2", a, oa, "{\"step\": 2}", {}, true);  // whole, from the snapshot
  EXPECT_EQ(s2.prev, "");
  writer.wait();
  EXPECT_EQ(writer.totals().wholes, 2u);
  EXPECT_EQ(writer.totals().deltas, 1u);
  EXPECT_EQ(writer.totals().delta_bytes, fs::file_size(d / "1"));
  EXPECT_LT(writer.totals().delta_bytes, fs::file_size(d / "0"));
  for (const char* point : {"1", "2"}) {
    Dlrm<float> b(test::tiny_config(), 2);
    Optimizer<float> ob(oo, b);
    load_checkpoint(d / point, b, &ob);
    if (point[0] == '1') train(b, ob, 1, 1);
    expect_same(a, oa, b, ob);
  }

  writer.save(d / "3", a, oa, "{}", {}, false);
  writer.wait();
  writer.save(d / "no" / "such" / "dir", a, oa, "{}", {}, false);
  EXPECT_NE(input_error([&] { writer.wait(); }).find("cannot create"), std::string::npos);
  EXPECT_EQ(writer.save(d / "4", a, oa, "{}", {}, false).prev, "");  // whole again
  writer.wait();
  EXPECT_EQ(checkpoint_chain(d / "4"), std::vector<std::string>{d / "4"});
  fs::remove_all(d);
}

}  // namespace
}  // namespace sparq
