// `sparq gen-data`: a synthetic Criteo-like data set, written as Criteo TSV
// (or sparq's binary format), with labels from a planted teacher DLRM.
//
//   DIR/train.tsv   samples 0 .. N-1
//   DIR/test.tsv    samples 2^40 .. 2^40 + M - 1 (independent of N)
//   DIR/teacher.json  calibration and the teacher's own test loss/AUC: the
//                     ceiling a student can reach on this data
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "sparq/core/error.h"
#include "sparq/data/binary_format.h"
#include "sparq/model/blas.h"
#include "sparq/model/parallel.h"
#include "sparq/model/dlrm.h"
#include "sparq/model/loss.h"
#include "sparq/model/metrics.h"
#include "sparq/model/teacher.h"
#include "tools/commands.h"
#include "tools/synthetic_data.h"

namespace sparq::cli {

namespace {

struct GenArgs {
  std::string out;
  std::size_t num_samples = 1000000;
  std::size_t num_test = 100000;
  std::uint64_t seed = 1;
  double zipf = 1.1;
  std::string cardinalities;  // dash list or one value; empty = defaults
  std::string format = "tsv";
  int threads = 2;
  double teacher_emb_std = TeacherOptions{}.emb_std;
  double teacher_rare_scale = TeacherOptions{}.rare_scale;
  double teacher_auc = TeacherOptions{}.target_auc;
  double positives = TeacherOptions{}.target_positive;
};

void write_split(Teacher& t, std::uint64_t first, std::size_t count, const std::string& path, bool binary,
                 int threads, std::vector<float>* probs, std::vector<float>* labels) {
  const std::size_t chunk = 1 << 16;
  std::FILE* f = nullptr;
  std::unique_ptr<BinaryWriter> bw;
  if (binary) {
    bw = std::make_unique<BinaryWriter>(path);
  } else {
    f = std::fopen(path.c_str(), "wb");
    SPARQ_CHECK_AS(InputError, f != nullptr, "cannot create '{}'", path);
  }
  std::vector<CriteoRecord> recs;
  std::string tsv;
  for (std::size_t done = 0; done < count; done += chunk) {
    const std::size_t n = std::min(chunk, count - done);
    recs.clear();
    tsv.clear();
    t.generate(first + done, n, &recs, probs, binary ? nullptr : &tsv, threads);
    if (labels)
      for (const auto& r : recs) labels->push_back(r.label);
    if (binary) {
      bw->write(recs);
    } else if (std::fwrite(tsv.data(), 1, tsv.size(), f) != tsv.size()) {
      std::fclose(f);
      SPARQ_THROW(InputError, "write error on '{}'", path);
    }
  }
  if (binary) bw->close();
  else SPARQ_CHECK_AS(InputError, std::fclose(f) == 0, "write error on '{}'", path);
}

void run_gen(const GenArgs& a) {
  set_blas_threads(a.threads);
  set_compute_threads(a.threads);
  SyntheticOptions so = synthetic_options(a.seed, a.zipf, a.cardinalities);
  TeacherOptions to;
  to.seed = a.seed;
  to.emb_std = a.teacher_emb_std;
  to.rare_scale = a.teacher_rare_scale;
  to.target_auc = a.teacher_auc;
  to.target_positive = a.positives;
  SPARQ_CHECK_AS(InputError, to.target_auc > 0.5 && to.target_auc < 1, "--teacher-auc must be in (0.5, 1)");
  SPARQ_CHECK_AS(InputError, to.target_positive > 0 && to.target_positive < 1, "--positives must be in (0, 1)");
  SPARQ_CHECK_AS(InputError, a.format == "tsv" || a.format == "bin", "--format must be tsv or bin, got '{}'", a.format);
  const bool bin = a.format == "bin";
  std::filesystem::create_directories(a.out);
  const auto t0 = std::chrono::steady_clock::now();
  Teacher teacher(to, so);
  const auto& c = teacher.calibration();
  fmt::print("teacher: calibrated a {:.4f} c {:.4f} (pilot: positives {:.4f}, expected auc {:.4f})\n", c.a, c.c,
             c.positive_rate, c.expected_auc);
  const std::string ext = bin ? ".bin" : ".tsv";
  write_split(teacher, 0, a.num_samples, a.out + "/train" + ext, bin, a.threads, nullptr, nullptr);
  std::vector<float> p, y;
  write_split(teacher, kTestIndexBase, a.num_test, a.out + "/test" + ext, bin, a.threads, &p, &y);
  const TeacherScore s = score_teacher(p, y);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("wrote {} train + {} test samples to {} ({}) in {:.1f} s\n", a.num_samples, a.num_test, a.out, a.format,
             secs);
  fmt::print("teacher test loss {:.6f}, accuracy {:.3f} %, auc {:.4f}, positives {:.3f} %\n", s.loss,
             100 * s.accuracy, s.auc, 100 * s.positives);
  nlohmann::json j;
  j["seed"] = a.seed;
  j["zipf"] = a.zipf;
  j["cardinalities"] = so.cardinalities;
  j["num_samples"] = a.num_samples;
  j["num_test"] = a.num_test;
  j["calibration"] = {{"a", c.a}, {"c", c.c}, {"mean", c.mean}, {"std", c.std}};
  j["teacher_test"] = {{"loss", s.loss}, {"accuracy", s.accuracy}, {"auc", s.auc}, {"positives", s.positives}};
  std::ofstream(a.out + "/teacher.json") << j.dump(2) << "\n";
}

}  // namespace

void add_gen_data(CLI::App& app, Run& run) {
  auto a = std::make_shared<GenArgs>();
  auto* c = app.add_subcommand("gen-data", "Generate a synthetic Criteo-like data set (labels from a planted teacher DLRM)");
  c->add_option("--out", a->out, "Output directory (train.tsv, test.tsv, teacher.json)")->required();
  c->add_option("--num-samples", a->num_samples, "Training samples")->capture_default_str();
  c->add_option("--num-test", a->num_test, "Test samples")->capture_default_str();
  c->add_option("--seed", a->seed, "Seed of features, teacher and labels")->capture_default_str();
  c->add_option("--zipf", a->zipf, "Zipf exponent of the categorical values")->capture_default_str();
  c->add_option("--cardinalities", a->cardinalities,
                "Distinct values per categorical feature: 26 dash-separated counts or one for all (default: a "
                "Criteo-like spread, 3 .. 100000)");
  c->add_option("--format", a->format, "tsv (Criteo text) or bin (sparq binary)")->capture_default_str();
  c->add_option("--threads", a->threads, "Threads for generation")->capture_default_str();
  c->add_option("--teacher-auc", a->teacher_auc, "Label noise: the teacher's expected AUC")->capture_default_str();
  c->add_option("--positives", a->positives, "Fraction of positive labels")->capture_default_str();
  c->add_option("--teacher-emb-std", a->teacher_emb_std, "Std of the teacher's embeddings")->capture_default_str();
  c->add_option("--teacher-rare-scale", a->teacher_rare_scale,
                "Teacher row k is scaled by 1/sqrt(1 + k/this) (0 = off)")->capture_default_str();
  c->callback([a, &run] { run = [a] { run_gen(*a); }; });
}

}  // namespace sparq::cli
