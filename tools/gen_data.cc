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
//
// --format libsvm --like url|webspam [--scale F] writes sparse rows of the
// shape of the URL or Webspam set instead (libsvm_synthetic.h), labels from a
// planted linear teacher: DIR/train.svm (the shape's samples), DIR/test.svm
// (a tenth of that, from index 2^40), .svm.gz with --gzip.
#include <fmt/format.h>
#include <zlib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>

#include "sparq/core/error.h"
#include "sparq/data/binary_format.h"
#include "sparq/data/libsvm.h"
#include "sparq/data/libsvm_synthetic.h"
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
  std::string like;  // --format libsvm: url or webspam
  double scale = 1;
  double teacher_accuracy = 0;
  std::size_t cooccur = 1;  // --format libsvm: features a group that appear together
  std::set<std::string> given;  // the flags on the command line ("--seed", ...)
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

// Samples first .. first + count - 1 to path, in order: each chunk is cut into
// one contiguous part per thread, formatted in parallel, written in order, so
// the file does not depend on the thread count. Returns the non-zeros.
std::size_t write_libsvm_split(const LibsvmSynthetic& g, std::uint64_t first, std::size_t count,
                               const std::string& path, std::vector<float>* probs, std::vector<float>* labels) {
  // ~4M non-zeros a chunk (60-80 MB of text): 36k URL-like rows, 1k Webspam-like.
  const auto chunk = std::max<std::size_t>(64, static_cast<std::size_t>(4e6 / g.options().shape.mean_nnz));
  const auto parts = static_cast<std::size_t>(compute_threads());
  std::vector<std::string> text(parts);
  std::vector<std::vector<float>> p(parts), y(parts);
  std::vector<std::size_t> nnz(parts);
  TextWriter f(path);
  for (std::size_t done = 0; done < count; done += chunk) {
    const std::size_t n = std::min(chunk, count - done);
    parallel_for(parts, 1, [&](std::size_t b, std::size_t e) {
      LibsvmRow row;
      for (std::size_t t = b; t < e; ++t) {
        text[t].clear();
        for (std::size_t i = n * t / parts; i < n * (t + 1) / parts; ++i) {
          g.sample(first + done + i, row);
          format_libsvm_row(row.label, row.indices, row.values, text[t]);
          nnz[t] += row.indices.size();
          p[t].push_back(row.probability);
          y[t].push_back(row.label > 0 ? 1.0f : 0.0f);
        }
      }
    });
    for (std::size_t t = 0; t < parts; ++t) {
      f.write(text[t]);
      if (probs) probs->insert(probs->end(), p[t].begin(), p[t].end());
      if (labels) labels->insert(labels->end(), y[t].begin(), y[t].end());
      p[t].clear();
      y[t].clear();
    }
  }
  f.close();
  return std::accumulate(nnz.begin(), nnz.end(), std::size_t{0});
}

LibsvmSyntheticOptions libsvm_options(const GenArgs& a) {
  for (const char* flag : {"--days", "--cardinalities", "--teacher-auc", "--teacher-emb-std", "--teacher-rare-scale"})
    SPARQ_CHECK_AS(InputError, !a.given.contains(flag), "{} does not apply to --format libsvm", flag);
  SPARQ_CHECK_AS(InputError, !a.like.empty(), "--format libsvm needs --like url or --like webspam");
  LibsvmSyntheticOptions o{.shape = libsvm_shape(a.like, a.scale), .seed = a.seed};
  if (a.given.contains("--zipf")) o.zipf = a.zipf;
  o.cooccur = a.cooccur;
  if (a.given.contains("--positives")) o.shape.positives = a.positives;
  if (a.given.contains("--teacher-accuracy")) o.shape.teacher_accuracy = a.teacher_accuracy;
  return o;
}

nlohmann::json libsvm_json(const GenArgs& a, const LibsvmSynthetic& g, std::size_t train, std::size_t test) {
  const LibsvmShape& s = g.options().shape;
  const auto& c = g.calibration();
  nlohmann::json j;
  j["format"] = "libsvm";
  j["shape"] = {{"like", s.name},
                {"scale", a.scale},
                {"samples", s.samples},
                {"features", s.features},
                {"mean_nnz", s.mean_nnz},
                {"positives", s.positives},
                {"binary_values", s.binary_values},
                {"real_features", s.real_features},
                {"nnz_sigma", s.nnz_sigma},
                {"teacher_accuracy", s.teacher_accuracy}};
  j["seed"] = a.seed;
  j["zipf"] = g.options().zipf;
  j["cooccur"] = g.options().cooccur;
  j["num_samples"] = train;
  j["num_test"] = test;
  j["calibration"] = {{"a", c.a},       {"c", c.c},
                      {"mean", c.mean}, {"std", c.std},
                      {"positive_rate", c.positive_rate}, {"expected_accuracy", c.expected_accuracy}};
  return j;
}

void run_gen_libsvm(const GenArgs& a) {
  const auto t0 = std::chrono::steady_clock::now();
  const LibsvmSynthetic g(libsvm_options(a));
  const LibsvmShape& s = g.options().shape;
  const auto& c = g.calibration();
  const std::size_t train = a.given.contains("--num-samples") ? a.num_samples : s.samples;
  const std::size_t test = a.given.contains("--num-test") ? a.num_test : std::max<std::size_t>(1, s.samples / 10);
  fmt::print("libsvm {}-like at scale {}: {} features, {:.1f} non-zeros a sample; teacher calibrated a {:.4f} c {:.4f} "
             "(pilot: positives {:.4f}, expected accuracy {:.4f})\n",
             s.name, a.scale, s.features, s.mean_nnz, c.a, c.c, c.positive_rate, c.expected_accuracy);
  std::filesystem::create_directories(a.out);
  const std::string train_path = a.out + "/train.svm" + (a.gzip ? ".gz" : "");
  const std::string test_path = a.out + "/test.svm" + (a.gzip ? ".gz" : "");
  std::vector<float> p, y;
  const std::size_t nnz = write_libsvm_split(g, 0, train, train_path, nullptr, nullptr) +
                          write_libsvm_split(g, kTestIndexBase, test, test_path, &p, &y);
  const TeacherScore sc = score_teacher(p, y);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto bytes = std::filesystem::file_size(train_path) + std::filesystem::file_size(test_path);
  fmt::print("wrote {} train + {} test samples ({} non-zeros, {:.1f} MB) to {} (libsvm) in {:.1f} s ({:.0f} samples/s)\n",
             train, test, nnz, static_cast<double>(bytes) / 1e6, a.out, secs, static_cast<double>(train + test) / secs);
  fmt::print("teacher test loss {:.6f}, accuracy {:.3f} %, auc {:.4f}, positives {:.3f} %\n", sc.loss,
             100 * sc.accuracy, sc.auc, 100 * sc.positives);
  nlohmann::json j = libsvm_json(a, g, train, test);
  j["teacher_test"] = {{"loss", sc.loss}, {"accuracy", sc.accuracy}, {"auc", sc.auc}, {"positives", sc.positives}};
  std::ofstream(a.out + "/teacher.json") << j.dump(2) << "\n";
}

void run_gen(const GenArgs& a) {
  set_blas_threads(a.threads);
  set_compute_threads(a.threads);
  if (a.format == "libsvm") return run_gen_libsvm(a);
  for (const char* flag : {"--like", "--scale", "--teacher-accuracy", "--cooccur"})
    SPARQ_CHECK_AS(InputError, !a.given.contains(flag), "{} applies to --format libsvm only", flag);
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
                 "--format must be tsv, bin, terabyte or libsvm, got '{}'", a.format);
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
  auto* c = app.add_subcommand("gen-data", "Generate a synthetic Criteo-like data set (labels from a planted teacher DLRM), or libsvm rows "
      "of the URL or Webspam shape (--format libsvm)");
  c->add_option("--out", a->out, "Output directory (train.tsv|bin|svm, test.tsv|bin|svm, teacher.json)")->required();
  c->add_option("--num-samples", a->num_samples, "Training samples (--format libsvm: the shape's)")
      ->capture_default_str();
  c->add_option("--num-test", a->num_test, "Test samples (--format libsvm: a tenth of the shape's)")
      ->capture_default_str();
  c->add_option("--seed", a->seed, "Seed of features, teacher and labels")->capture_default_str();
  c->add_option("--zipf", a->zipf, "Zipf exponent of the categorical values (--format libsvm: of the features, 1.0)")
      ->capture_default_str();
  c->add_option("--cardinalities", a->cardinalities,
                "Distinct values per categorical feature: 26 dash-separated counts or one for all (default: a "
                "Criteo-like spread, 3 .. 100000)");
  c->add_option("--format", a->format,
                "tsv (Criteo text), bin (sparq binary), terabyte (Criteo Terabyte's day files day_0 .. day_{D-1}) or "
                "libsvm (sparse rows of --like's shape)")
      ->capture_default_str();
  c->add_option("--days", a->days, "--format terabyte: day files")->capture_default_str();
  c->add_flag("--gzip", a->gzip, "--format terabyte or libsvm: write day_N.gz, train.svm.gz and test.svm.gz");
  c->add_option("--like", a->like, "--format libsvm: the shape, url or webspam");
  c->add_option("--scale", a->scale, "--format libsvm: samples and features times this, in (0, 1]")
      ->capture_default_str();
  c->add_option("--teacher-accuracy", a->teacher_accuracy,
                "--format libsvm: label noise as the teacher's expected accuracy (default: the shape's, url 0.97, "
                "webspam 0.985)");
  c->add_option("--cooccur", a->cooccur,
                "--format libsvm: features come in groups of this many that always appear together (as a word and "
                "its n-grams in text; 1: independent)")
      ->capture_default_str();
  c->add_option("--threads", a->threads, "Threads for generation")->capture_default_str();
  c->add_option("--teacher-auc", a->teacher_auc, "Label noise: the teacher's expected AUC")->capture_default_str();
  c->add_option("--positives", a->positives, "Fraction of positive labels")->capture_default_str();
  c->add_option("--teacher-emb-std", a->teacher_emb_std, "Std of the teacher's embeddings")->capture_default_str();
  c->add_option("--teacher-rare-scale", a->teacher_rare_scale,
                "Teacher row k is scaled by 1/sqrt(1 + k/this) (0 = off)")->capture_default_str();
  c->callback([a, c, &run] {
    for (const CLI::Option* o : c->get_options())
      if (o->count() > 0 && !o->get_lnames().empty()) a->given.insert("--" + o->get_lnames()[0]);
    run = [a] { run_gen(*a); };
  });
}

}  // namespace sparq::cli
