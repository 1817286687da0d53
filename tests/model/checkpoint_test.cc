// Resuming from a checkpoint continues bit-for-bit like an uninterrupted run.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <sys/resource.h>
#include <unistd.h>

#include <csignal>

#include "sparq/core/error.h"
#include "sparq/model/checkpoint.h"
#include "tests/model/tiny.h"

namespace sparq {
namespace {

using test::train;

TEST(Checkpoint, ResumeIsBitwise) {
  const auto path = (std::filesystem::temp_directory_path() / ("sparq_ck_" + std::to_string(::getpid()))).string();
  for (auto [eo, dense] : {std::pair{EmbeddingOptim::Sgd, DenseOptim::Sgd},
                           std::pair{EmbeddingOptim::RowwiseAdagrad, DenseOptim::Sgd},
                           std::pair{EmbeddingOptim::Sgd, DenseOptim::Adagrad},
                           std::pair{EmbeddingOptim::RowwiseAdagrad, DenseOptim::Adam}}) {
    // With a schedule whose warmup ends and decay runs after the save.
    OptimizerOptions oo{.lr = 0.05, .embedding = eo, .dense = dense, .schedule = {3, 6, 3}};
    Dlrm<float> a(test::tiny_config(), 1);
    Optimizer<float> oa(oo, a);
    train(a, oa, 5, 0);
    save_checkpoint(path, a, oa, "{\"step\": 5}");
    train(a, oa, 5, 5);

    Dlrm<float> b(test::tiny_config(), 99);  // different init: everything must come from the file
    Optimizer<float> ob(oo, b);
    EXPECT_EQ(load_checkpoint(path, b, &ob), "{\"step\": 5}");
    EXPECT_EQ(read_checkpoint_meta(path), "{\"step\": 5}");
    ob.set_steps(5);  // what the trainer takes from the meta
    train(b, ob, 5, 5);
    EXPECT_EQ(std::memcmp(a.dense().params().data(), b.dense().params().data(), a.dense().size() * 4), 0);
    for (std::size_t t = 0; t < a.tables().size(); ++t)
      EXPECT_EQ(std::memcmp(a.tables()[t].weights().data(), b.tables()[t].weights().data(),
                            a.tables()[t].weights().size() * 4),
                0);
  }
  DlrmConfig other = test::tiny_config();
  other.table_rows[0] = 8;
  Dlrm<float> c(other, 1);
  Optimizer<float> oc({}, c);
  EXPECT_THROW(load_checkpoint(path, c, &oc), InputError);
  Dlrm<float> d(test::tiny_config(), 1);
  Optimizer<float> od({.dense = DenseOptim::Adagrad}, d);  // saved with Adam: 2 dense vectors, not 1
  EXPECT_THROW(load_checkpoint(path, d, &od), InputError);
  std::filesystem::remove(path);
}

// A rank holding only some tables (table-wise placement) reads its own
// tables and their optimizer state from a whole checkpoint and skips the
// others; its held tables start as the whole model's do. It cannot save.
TEST(Checkpoint, PartialModelLoadsItsOwnTables) {
  const auto path = (std::filesystem::temp_directory_path() / ("sparq_ckp_" + std::to_string(::getpid()))).string();
  const OptimizerOptions oo{.lr = 0.05, .embedding = EmbeddingOptim::RowwiseAdagrad, .dense = DenseOptim::Adam};
  Dlrm<float> a(test::tiny_config(), 1);
  Optimizer<float> oa(oo, a);
  const std::vector<bool> hold{false, true, false};
  Dlrm<float> fresh(test::tiny_config(), 1, {}, hold);
  EXPECT_FALSE(fresh.tables()[0].held());
  EXPECT_TRUE(fresh.tables()[0].weights().empty());
  EXPECT_EQ(fresh.tables()[0].rows(), 7u);
  EXPECT_EQ(std::memcmp(fresh.tables()[1].weights().data(), a.tables()[1].weights().data(), 5 * 3 * 4), 0);
  Optimizer<float> of(oo, fresh);
  EXPECT_THROW(save_checkpoint(path, fresh, of, "{}"), Error);

  train(a, oa, 4, 0);
  save_checkpoint(path, a, oa, "{\"step\": 4}");
  Dlrm<float> b(test::tiny_config(), 99, {}, hold);
  Optimizer<float> ob(oo, b);
  EXPECT_EQ(load_checkpoint(path, b, &ob), "{\"step\": 4}");
  EXPECT_EQ(std::memcmp(a.dense().params().data(), b.dense().params().data(), a.dense().size() * 4), 0);
  EXPECT_EQ(std::memcmp(a.tables()[1].weights().data(), b.tables()[1].weights().data(), 5 * 3 * 4), 0);
  EXPECT_EQ(oa.table_state()[1], ob.table_state()[1]);
  EXPECT_TRUE(ob.table_state()[0].empty());
  for (std::size_t i = 0; i < oa.dense_state().size(); ++i) EXPECT_EQ(oa.dense_state()[i], ob.dense_state()[i]);
  const Batch batch = test::tiny_batch(0);
  EXPECT_THROW(b.forward(batch), Error);  // it has no table 0 to look up
  std::filesystem::remove(path);
}

// Each rank's codec state comes back as saved; meta alone and the model
// configuration are readable without building a model first.
TEST(Checkpoint, RankStatesAndConfig) {
  const auto path = (std::filesystem::temp_directory_path() / ("sparq_ck2_" + std::to_string(::getpid()))).string();
  const DlrmConfig cfg = test::tiny_config();
  Dlrm<float> a(cfg, 1);
  Optimizer<float> oa({}, a);
  const std::vector<std::vector<std::byte>> states = {{std::byte{1}, std::byte{2}}, {}, {std::byte{7}}};
  nlohmann::json meta = {{"step", 3}, {"config", checkpoint_config_json(cfg)}};
  save_checkpoint(path, a, oa, meta.dump(), states);
  EXPECT_EQ(read_checkpoint_meta(path), meta.dump());
  const DlrmConfig back = checkpoint_config(read_checkpoint_meta(path), path);
  EXPECT_EQ(back.bot_mlp, cfg.bot_mlp);
  EXPECT_EQ(back.top_mlp, cfg.top_mlp);
  EXPECT_EQ(back.table_rows, cfg.table_rows);
  EXPECT_EQ(back.emb_dim, cfg.emb_dim);
  Dlrm<float> b(cfg, 2);
  Optimizer<float> ob({}, b);
  std::vector<std::vector<std::byte>> got;
  load_checkpoint(path, b, &ob, &got);
  EXPECT_EQ(got, states);
  Dlrm<float> c(cfg, 3);  // the model alone
  load_checkpoint(path, c, nullptr);
  EXPECT_EQ(std::memcmp(a.dense().params().data(), c.dense().params().data(), a.dense().size() * 4), 0);
  EXPECT_THROW(checkpoint_config("{\"step\": 3}", path), InputError);

  // A first-format file (no codec section) still loads.
  save_checkpoint(path, a, oa, "{}");
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[7] = '1';
  bytes.resize(bytes.size() - 4 - 8);  // the CRC and the empty codec section
  std::ofstream(path, std::ios::binary) << bytes;
  got = states;
  EXPECT_EQ(load_checkpoint(path, b, &ob, &got), "{}");
  EXPECT_TRUE(got.empty());
  std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  EXPECT_THROW(load_checkpoint(path, b, &ob), InputError);
  std::filesystem::remove(path);
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// `bytes` under `path` must not load: an InputError of one line naming the
// file, from every reader.
void expect_rejected(const std::string& path, const std::string& bytes, const std::string& what) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  static Dlrm<float> m(test::tiny_config(), 5);
  static Optimizer<float> o({.embedding = EmbeddingOptim::RowwiseAdagrad, .dense = DenseOptim::Adam}, m);
  std::vector<std::vector<std::byte>> states;
  for (int reader = 0; reader < 3; ++reader) {
    try {
      if (reader == 0) load_checkpoint(path, m, &o, &states);
      if (reader == 1) load_checkpoint(path, m, nullptr);
      if (reader == 2) read_checkpoint_meta(path);
      ADD_FAILURE() << what << ": reader " << reader << " loaded it";
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path), std::string::npos) << what << ": " << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << what << ": " << msg;
    }
  }
}

// The CRC: every single-bit flip (one per byte, rotating through the bit
// positions) and every truncation of a small checkpoint is an InputError
// naming the file, never a crash or a silent load.
TEST(Checkpoint, CorruptOrTruncatedIsAnInputError) {
  const auto path = (std::filesystem::temp_directory_path() / ("sparq_ck3_" + std::to_string(::getpid()))).string();
  Dlrm<float> a(test::tiny_config(), 1);
  Optimizer<float> oa({.embedding = EmbeddingOptim::RowwiseAdagrad, .dense = DenseOptim::Adam}, a);
  const std::vector<std::vector<std::byte>> states = {{std::byte{1}, std::byte{2}}, {std::byte{7}}};
  save_checkpoint(path, a, oa, "{\"step\": 3}", states);
  const std::string good = read_all(path);
  ASSERT_EQ(good.substr(0, 8), "SPARQCK4");
  for (std::size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ (1 << (i % 8)));
    expect_rejected(path, bad, fmt::format("bit {} of byte {} flipped", i % 8, i));
  }
  for (std::size_t n = 0; n < good.size(); ++n) expect_rejected(path, good.substr(0, n), fmt::format("{} bytes", n));
  // The unchecked SPARQCK2 layout (the same without the CRC) still loads.
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "SPARQCK2" + good.substr(8, good.size() - 12);
  Dlrm<float> b(test::tiny_config(), 2);
  Optimizer<float> ob({.embedding = EmbeddingOptim::RowwiseAdagrad, .dense = DenseOptim::Adam}, b);
  std::vector<std::vector<std::byte>> got;
  EXPECT_EQ(load_checkpoint(path, b, &ob, &got), "{\"step\": 3}");
  EXPECT_EQ(got, states);
  std::filesystem::remove(path);
}

// A save that runs out of space (here: the file size limit, which fails the
// write like a full disk does) is an error and leaves the previous
// checkpoint whole, and no temporary file behind.
TEST(Checkpoint, FailedSaveKeepsThePreviousOne) {
  const auto path = (std::filesystem::temp_directory_path() / ("sparq_ck4_" + std::to_string(::getpid()))).string();
  Dlrm<float> a(test::tiny_config(), 1);
  Optimizer<float> oa({}, a);
  save_checkpoint(path, a, oa, "{\"step\": 1}");
  const std::string before = read_all(path);
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of the signal
  rlimit small = old;
  small.rlim_cur = before.size() / 2;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  EXPECT_THROW(save_checkpoint(path, a, oa, "{\"step\": 2}"), InputError);
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(read_all(path), before);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  Dlrm<float> b(test::tiny_config(), 2);
  EXPECT_EQ(load_checkpoint(path, b, nullptr), "{\"step\": 1}");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace sparq
