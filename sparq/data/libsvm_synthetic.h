#pragma once
// Synthetic binary classification rows of the published shapes of two libsvm
// sets used by SparCML's MPI-OPT experiments: URL (Ma et al., ICML 2009) and
// Webspam trigrams (LIBSVM data page); the figures and their sources are in
// docs/data.md. Labels come from a planted sparse linear teacher, so the
// accuracy a trained linear model reaches can be compared with the teacher's.
//
// Sample i is a pure function of (seed, i): Rng(seed, i) draws it, so any
// range can be generated independently (chunked, threaded, per rank) with
// identical results.
//
//  non-zeros:  round(mean_nnz * exp(sigma Z - sigma^2/2)), Z ~ N(0, 1) (a
//              lognormal spread with the shape's mean), clipped to [1, features/2];
//  features:   URL-like rows first get `real_features` real-valued features
//              (ids 0 .. R-1, each present with probability 1/2, value uniform
//              in (0, 1] in steps of 1/1000), then distinct binary features
//              (value 1) drawn as Zipf ranks over the other ids; Webspam-like
//              rows draw all features by Zipf rank, each with a count
//              1 + floor(exp(|Z|)), and are scaled to unit L2 norm. A rank is
//              mapped to its feature id by a fixed random permutation: in the
//              real sets ids follow a dictionary, not frequency, and a sparse
//              allreduce that cuts the id space into blocks must not find all
//              the frequent features in the first block. With `cooccur` c > 1
//              ranks are drawn for groups of c features that appear together.
//  labels:     margin m = w*.x; p = sigmoid(a (m - mean)/std + c); label +1
//              with probability p (logistic label noise). A quarter of the
//              features carry a weight N(0, 1) / sqrt(1 + rank / r0), r0 =
//              max(10, features / 1000), so the signal sits in features seen
//              often enough to be learnt. On a pilot set c is bisected for the
//              shape's positive rate and a for the teacher's expected accuracy.
//
// Memory: 8 bytes per feature (the permutation and the teacher's weights):
// 26 MB for URL, 133 MB for Webspam at scale 1.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sparq/core/rng.h"

namespace sparq {

struct LibsvmShape {
  std::string name;                // "url" or "webspam"
  std::size_t samples = 0;         // training samples at this scale
  std::size_t features = 0;
  double mean_nnz = 0;             // non-zeros per sample
  double positives = 0;            // fraction of +1 labels
  bool binary_values = true;       // URL-like (1 + a few real values) or normalised frequencies
  std::size_t real_features = 0;   // URL-like: real-valued features (ids 0 .. R-1)
  double nnz_sigma = 0;            // lognormal spread of the non-zeros per sample
  double teacher_accuracy = 0;     // the teacher's expected accuracy (sets the label noise)
};

// "url" or "webspam" (else InputError) at a scale in (0, 1]: samples and
// features shrink together; mean_nnz is kept, but at most features / 4.
LibsvmShape libsvm_shape(std::string_view like, double scale);

struct LibsvmSyntheticOptions {
  LibsvmShape shape;
  std::uint64_t seed = 1;
  double zipf = 1.0;  // P(feature of rank k) ~ (k + 1)^-zipf
  // Features come in groups of this many that always appear together (as a
  // word and its n-grams do in text): ranks are drawn for groups, group g
  // being feature ranks g c .. g c + c - 1. 1: every feature drawn alone.
  std::size_t cooccur = 1;
};

// One generated sample: 0-based feature ids, strictly increasing.
struct LibsvmRow {
  float label = 0;          // -1 or +1
  float probability = 0;    // the teacher's P(label = +1)
  std::vector<std::uint32_t> indices;
  std::vector<float> values;
};

// Zipf ranks in [0, n) with P(k) ~ (k + 1)^-s (s > 0) in O(1) time and memory:
// rejection-inversion (Hoermann and Derflinger, ACM TOMACS 6(3), 1996), the
// method of Apache Commons' RejectionInversionZipfSampler.
class ZipfSampler {
 public:
  ZipfSampler(std::size_t n, double s);
  std::size_t operator()(Rng& rng) const;

 private:
  double h(double x) const;
  double h_integral(double x) const;
  double h_integral_inverse(double x) const;
  double n_, s_, h_x1_, h_n_, shortcut_;
};

class LibsvmSynthetic {
 public:
  struct Calibration {
    double mean = 0, std = 1, a = 1, c = 0;  // p = sigmoid(a (m - mean) / std + c)
    double positive_rate = 0, expected_accuracy = 0;  // on the pilot set
  };
  using Callback = std::function<void(float label, std::span<const std::uint32_t> idx, std::span<const float> val)>;

  explicit LibsvmSynthetic(const LibsvmSyntheticOptions& opts);
  void sample(std::uint64_t index, LibsvmRow& row) const;
  // Samples first .. first + count - 1 in order.
  void generate(std::uint64_t first, std::size_t count, const Callback& f) const;
  // The teacher's margin w*.x of a row (0-based ids).
  double margin(std::span<const std::uint32_t> idx, std::span<const float> val) const;
  const Calibration& calibration() const { return cal_; }
  const LibsvmSyntheticOptions& options() const { return opts_; }

 private:
  void features(Rng& rng, LibsvmRow& row) const;
  void draw_ranks(Rng& rng, std::size_t k, std::vector<std::uint32_t>& ranks) const;
  void calibrate();

  LibsvmSyntheticOptions opts_;
  std::size_t real_;                     // real-valued features (ids 0 .. real_ - 1)
  ZipfSampler zipf_;                     // over the other features
  std::vector<std::uint32_t> rank_to_id_;
  std::vector<float> weight_;            // the teacher's w*, by feature id
  Calibration cal_;
};

}  // namespace sparq
