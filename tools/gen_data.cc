// `sparq gen-data`: a synthetic Criteo-like data set, written as Criteo TSV
// (or sparq's binary format), with labels from a planted teacher DLRM.
//
//   DIR/train.tsv   samples 0 .. N-1
//   DIR/test.tsv    samples 2^40 .. 2^40 + M - 1 (independent of N)
//   DIR/teacher.json  calibration and the teacher's own test loss/AUC: the
//                     ceiling a student can reach on this data
//
// --format terabyte writes samples 0 .. N-1 as Criteo Terabyte's day files
// instead, DIR/day_0 .. day_{D-1} (--days D; .gz with --gzip), for
// `train --data-set terabyte --raw-data-file DIR/day`; the teacher is
// scored on the test half of the last day (criteo_days.h).
#include <fmt/format.h>
#include <zlib.h>
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
  std::size_t days = 24;  // terabyte
  bool gzip = false;
  int threads = 2;
  double teacher_emb_std = TeacherOptions{}.emb_std;
  double teacher_rare_scale = TeacherOptions{}.rare_scale;
  double teacher_auc = TeacherOptions{}.target_auc;
  double positives = TeacherOptions{}.target_positive;
};

// Criteo text, gzip-compressed when the path ends in ".gz" (zlib reads
// plain files too, so one writer serves both).
class TextWriter {
 public:
  explicit TextWriter(const std::string& path)
      : path_(path), gz_(gzopen(path.c_str(), path.ends_with(".gz") ? "wb6" : "wbT")) {
    SPARQ_CHECK_AS(InputError, gz_ != nullptr, "cannot create '{}'", path);
  }
  ~TextWriter() {
    if (gz_) gzclose(gz_);
  }
  void write(const std::string& s) {
    SPARQ_CHECK_AS(InputError, s.empty() || gzwrite(gz_, s.data(), static_cast<unsigned>(s.size())) > 0,
                   "write error on '{}'", path_);
  }
  void close() {
    const int rc = gzclose(gz_);
    gz_ = nullptr;
    SPARQ_CHECK_AS(InputError, rc == Z_OK, "write error on '{}'", path_);
  }

 private:
  std::string path_;
  gzFile gz_;
};

void write_split(Teacher& t, std::uint64_t first, std::size_t count, const std::string& path, bool binary,
                 int threads, std::vector<float>* probs, std::vector<float>* labels) {
  const std::size_t chunk = 1 << 16;
  std::unique_ptr<TextWriter> f;
  std::unique_ptr<BinaryWriter> bw;
  if (binary) bw = std::make_unique<BinaryWriter>(path);
  else f = std::make_unique<TextWriter>(path);
  std::vector<CriteoRecord> recs;
  std::string tsv;
  for (std::size_t done = 0; done < count; done += chunk) {
    const std::size_t n = std::min(chunk, count - done);
    recs.clear();
    tsv.clear();
    t.generate(
        first + done, n,
        [&](const SyntheticSample& s, float label, float p) {
          SyntheticFeatures::to_record(s, label, recs.emplace_back());
          if (probs) probs->push_back(p);
          if (!binary) format_criteo_line(label, s.ints, s.present, s.values, tsv);
        },
        threads);
    if (labels)
      for (const auto& r : recs) labels->push_back(r.label);
    if (binary) bw->write(recs);
    else f->write(tsv);
  }
  if (binary) bw->close();
  else f->close();
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
  SPARQ_CHECK_AS(InputError, a.format == "tsv" || a.format == "bin" || a.format == "terabyte",
                 "--format must be tsv, bin or terabyte, got '{}'", a.format);
  SPARQ_CHECK_AS(InputError, a.format == "terabyte" || (a.days == GenArgs{}.days && !a.gzip),
                 "--days and --gzip shape --format terabyte");
  SPARQ_CHECK_AS(InputError, a.format != "terabyte" || (a.days >= 2 && a.num_samples >= 2 * a.days),
                 "--format terabyte needs --days >= 2 and at least 2 samples per day");
  SPARQ_CHECK_AS(InputError, a.format != "terabyte" || a.num_test == GenArgs{}.num_test,
                 "--num-test does not apply to --format terabyte: the test set is the first half of the last day");
  const bool bin = a.format == "bin";
  std::filesystem::create_directories(a.out);
  const auto t0 = std::chrono::steady_clock::now();
  Teacher teacher(to, so);
  const auto& c = teacher.calibration();
  fmt::print("teacher: calibrated a {:.4f} c {:.4f} (pilot: positives {:.4f}, expected auc {:.4f})\n", c.a, c.c,
             c.positive_rate, c.expected_auc);
  std::vector<float> p, y;
  if (a.format == "terabyte") {  // days as the reference cuts a file: the first (N mod D) one sample longer
    std::uint64_t first = 0;
    for (std::size_t d = 0; d < a.days; ++d) {
      const std::size_t n = a.num_samples / a.days + (d < a.num_samples % a.days ? 1 : 0);
      const bool last = d + 1 == a.days;
      write_split(teacher, first, n, fmt::format("{}/day_{}{}", a.out, d, a.gzip ? ".gz" : ""), false, a.threads,
                  last ? &p : nullptr, last ? &y : nullptr);
      first += n;
    }
    p.resize((p.size() + 1) / 2);  // the test half
    y.resize(p.size());
  } else {
    const std::string ext = bin ? ".bin" : ".tsv";
    write_split(teacher, 0, a.num_samples, a.out + "/train" + ext, bin, a.threads, nullptr, nullptr);
    write_split(teacher, kTestIndexBase, a.num_test, a.out + "/test" + ext, bin, a.threads, &p, &y);
  }
  const TeacherScore s = score_teacher(p, y);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (a.format == "terabyte")
    fmt::print("wrote {} samples as {} day files {}/day_0{} .. day_{}{} in {:.1f} s\n", a.num_samples, a.days, a.out,
               a.gzip ? ".gz" : "", a.days - 1, a.gzip ? ".gz" : "", secs);
  else
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
  c->add_option("--format", a->format,
                "tsv (Criteo text), bin (sparq binary) or terabyte (Criteo Terabyte's day files day_0 .. day_{D-1})")
      ->capture_default_str();
  c->add_option("--days", a->days, "--format terabyte: day files")->capture_default_str();
  c->add_flag("--gzip", a->gzip, "--format terabyte: write day_N.gz");
  c->add_option("--threads", a->threads, "Threads for generation")->capture_default_str();
  c->add_option("--teacher-auc", a->teacher_auc, "Label noise: the teacher's expected AUC")->capture_default_str();
  c->add_option("--positives", a->positives, "Fraction of positive labels")->capture_default_str();
  c->add_option("--teacher-emb-std", a->teacher_emb_std, "Std of the teacher's embeddings")->capture_default_str();
  c->add_option("--teacher-rare-scale", a->teacher_rare_scale,
                "Teacher row k is scaled by 1/sqrt(1 + k/this) (0 = off)")->capture_default_str();
  c->callback([a, &run] { run = [a] { run_gen(*a); }; });
}

}  // namespace sparq::cli
