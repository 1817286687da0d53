// Resuming from a checkpoint continues bit-for-bit like an uninterrupted run.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <unistd.h>

#include "sparq/core/error.h"
#include "sparq/model/checkpoint.h"
#include "sparq/model/loss.h"
#include "tests/model/tiny.h"

namespace sparq {
namespace {

void train(Dlrm<float>& m, Optimizer<float>& opt, int steps, int first) {
  for (int s = first; s < first + steps; ++s) {
    const Batch b = test::tiny_batch(static_cast<std::uint64_t>(s));
    const auto z = m.forward(b);
    std::vector<float> dz(b.size);
    bce_with_logits<float>(z, b.labels, dz);
    m.backward(dz);
    opt.step();
  }
}

TEST(Checkpoint, ResumeIsBitwise) {
  const auto path = (std::filesystem::temp_directory_path() / ("sparq_ck_" + std::to_string(::getpid()))).string();
  for (auto eo : {EmbeddingOptim::Sgd, EmbeddingOptim::RowwiseAdagrad}) {
    OptimizerOptions oo{.lr = 0.05, .embedding = eo};
    Dlrm<float> a(test::tiny_config(), 1);
    Optimizer<float> oa(oo, a);
    train(a, oa, 5, 0);
    save_checkpoint(path, a, oa, "{\"step\": 5}");
    train(a, oa, 5, 5);

    Dlrm<float> b(test::tiny_config(), 99);  // different init: everything must come from the file
    Optimizer<float> ob(oo, b);
    EXPECT_EQ(load_checkpoint(path, b, &ob), "{\"step\": 5}");
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
  bytes.resize(bytes.size() - 8);  // the empty codec section
  std::ofstream(path, std::ios::binary) << bytes;
  got = states;
  EXPECT_EQ(load_checkpoint(path, b, &ob, &got), "{}");
  EXPECT_TRUE(got.empty());
  std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  EXPECT_THROW(load_checkpoint(path, b, &ob), InputError);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace sparq
