#pragma once
// The planted teacher of the synthetic data set (a model, so it lives in the
// model layer; the generators of features and file formats are in data/): a random DLRM whose output,
// squashed and calibrated, is the click probability of each generated
// sample. A student of the same family can learn it, and the teacher's own
// test loss/AUC is the ceiling a student can be measured against.
//
//   z_i = teacher logit of sample i;  s_i = (z_i - mean) / std  (pilot set)
//   p_i = sigmoid(a s_i + c);         label_i ~ Bernoulli(p_i)  (Rng(seed, i))
//
// a sets how much noise the labels carry (a -> 0: coin flips; a -> inf:
// deterministic labels); it is bisected so that the expected AUC of p
// against its own Bernoulli labels on the pilot set is `target_auc` (0.80,
// about Criteo's). For each a, c is bisected so that the mean of p is
// `target_positive` (0.25, about Criteo's click rate).
//
// Teacher embeddings are N(0, emb_std^2) rather than the reference's
// +-sqrt(1/rows): with the reference's init a 100000-row table contributes
// ~0.003 per element and the categoricals would carry no signal; rows of rare
// values are shrunk (rare_scale).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sparq/data/criteo.h"
#include "sparq/data/synthetic.h"
#include "sparq/model/dlrm.h"

namespace sparq {

struct TeacherOptions {
  std::uint64_t seed = 1;  // teacher weights and label draws (the features use SyntheticOptions::seed)
  std::vector<std::size_t> bot_mlp{13, 64, 16};
  std::vector<std::size_t> top_mlp{64, 1};
  std::size_t emb_dim = 16;
  double emb_std = 0.1;
  // Row k (the k-th most frequent value) is scaled by 1/sqrt(1 + k/rare_scale):
  // rare values carry little signal each, as in real logs, so what a student
  // can learn from a few million samples is most of what there is (0 = off).
  double rare_scale = 10;
  double target_positive = 0.25;
  double target_auc = 0.80;
  std::size_t pilot = 20000;
};

struct TeacherCalibration {
  double mean = 0, std = 1, a = 1, c = 0;
  double expected_auc = 0, positive_rate = 0;  // on the pilot set
};

// Test samples are drawn from indices kTestIndexBase + j, so the test set does
// not depend on the number of training samples.
constexpr std::uint64_t kTestIndexBase = std::uint64_t{1} << 40;

// The teacher's own test scores: the ceiling a student is measured against.
struct TeacherScore {
  double loss = 0, accuracy = 0, auc = 0.5, positives = 0;
};

// Scores probabilities p against labels y: BCE from the logit of p.
TeacherScore score_teacher(std::span<const float> p, std::span<const float> y);

class Teacher {
 public:
  Teacher(const TeacherOptions& opts, const SyntheticOptions& features);
  ~Teacher();

  // Samples [first, first + count), in order: take(sample, label, p) with
  // the teacher's click probability p and the label drawn from it (writing
  // them in a file format is the data layer's: format_criteo_line,
  // SyntheticFeatures::to_record). Feature drawing uses `threads`.
  using Take = std::function<void(const SyntheticSample& sample, float label, float p)>;
  void generate(std::uint64_t first, std::size_t count, const Take& take, int threads = 1);
  // The same samples as records (as a reader of their file would see them),
  // appended, and their probabilities (if probs).
  void generate(std::uint64_t first, std::size_t count, std::vector<CriteoRecord>& records, std::vector<float>* probs,
                int threads = 1);

  const TeacherCalibration& calibration() const { return cal_; }
  const SyntheticFeatures& features() const { return features_; }

 private:
  void logits(const std::vector<SyntheticSample>& s, std::vector<float>& z);
  TeacherOptions opts_;
  SyntheticFeatures features_;
  std::unique_ptr<Dlrm<float>> model_;
  TeacherCalibration cal_;
  Batch batch_;
};

}  // namespace sparq
