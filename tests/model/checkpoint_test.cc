// Resuming from a checkpoint continues bit-for-bit like an uninterrupted run.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

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
    EXPECT_EQ(load_checkpoint(path, b, ob), "{\"step\": 5}");
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
  EXPECT_THROW(load_checkpoint(path, c, oc), InputError);
  Dlrm<float> d(test::tiny_config(), 1);
  Optimizer<float> od({.dense = DenseOptim::Adagrad}, d);  // saved with Adam: 2 dense vectors, not 1
  EXPECT_THROW(load_checkpoint(path, d, od), InputError);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace sparq
