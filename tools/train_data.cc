#include "tools/train_data.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "sparq/core/error.h"
#include "sparq/data/criteo_days.h"
#include "sparq/data/npz.h"
#include "sparq/data/text_file.h"
#include "sparq/core/rng.h"
#include "tools/synthetic_data.h"

namespace sparq::cli {

namespace {

std::string pick(const std::string& dir, const std::string& stem) {
  for (const char* ext : {".bin", ".tsv", ".npz"}) {
    const auto p = dir + "/" + stem + ext;
    if (std::filesystem::exists(p)) return p;
  }
  return {};
}

// --data-size, --num-test, --zipf and --cardinalities shape the generated
// synthetic set; with other data they would be ignored, so they are errors.
void check_no_synthetic_flags(const TrainArgs& a, const char* source) {
  const TrainArgs d;
  SPARQ_CHECK_AS(InputError,
                 a.data_size == d.data_size && a.num_test == d.num_test && a.zipf == d.zipf &&
                     a.cardinalities == d.cardinalities,
                 "--data-size, --num-test, --zipf and --cardinalities shape --data-generation synthetic; they do not "
                 "apply to {}",
                 source);
}

std::optional<TeacherScore> read_teacher(const std::string& dir) {
  std::ifstream f(dir + "/teacher.json");
  if (!f) return std::nullopt;
  const auto j = nlohmann::json::parse(f, nullptr, false);
  if (j.is_discarded() || !j.contains("teacher_test")) return std::nullopt;
  const auto& t = j["teacher_test"];
  return TeacherScore{t["loss"], t["accuracy"], t["auc"], t["positives"]};
}

// --raw-data-file: the reference's split of the Kaggle or Terabyte days.
void load_raw_criteo(const TrainArgs& a, const TsvOptions& tsv, TrainData& d) {
  SPARQ_CHECK_AS(InputError, a.data_generation == "dataset" && a.data_path.empty() && a.test_data_path.empty(),
                 "--raw-data-file is the data: no --data-path, --test-data-path or --data-generation with it");
  check_no_synthetic_flags(a, "--raw-data-file");
  const CriteoSet set = parse_criteo_set(a.data_set);
  const std::size_t days = a.data_days ? a.data_days : default_days(set);
  const CriteoSplit s = plan_criteo_split(set, a.raw_data_file, days);
  TsvOptions o = tsv;
  o.first_line = s.train_begin;
  o.end_line = s.train_end;
  o.drop_negatives = a.sub_sample_rate;
  o.sample_seed = a.seed;
  std::size_t bad = 0;
  if (a.stream) {
    d.stream_files = s.train_files;
    d.stream_begin = s.train_begin;
    d.stream_end = s.train_end;
    d.drop_negatives = a.sub_sample_rate;
  } else {
    d.train = RecordSet(read_criteo_tsv(s.train_files, o, &bad));
    d.bad_lines += bad;
  }
  TsvOptions t = tsv;  // the test half of the last day, never sub-sampled
  t.first_line = s.test_begin;
  t.end_line = s.test_end;
  d.test = RecordSet(read_criteo_tsv(s.eval_files, t, &bad));
  d.bad_lines += bad;
  d.source = fmt::format(
      "{} split of {}: days 0-{} train ({} lines{}), day {} halved: test {} samples, validation {} samples", a.data_set,
      a.raw_data_file, s.train_days - 1, s.train_end - s.train_begin,
      a.sub_sample_rate > 0 ? fmt::format(", negatives kept with probability {}", 1 - a.sub_sample_rate) : "",
      s.train_days, s.test_end - s.test_begin, s.val_end - s.val_begin);
}

// --data-path: a directory (train/test files, a teacher's scores) or files.
void load_files(const TrainArgs& a, const TsvOptions& tsv, TrainData& d) {
  SPARQ_CHECK_AS(InputError, !a.data_path.empty(),
                 "--data-path or --raw-data-file is required with --data-generation dataset");
  std::string train = a.data_path, test = a.test_data_path;
  check_no_synthetic_flags(a, "--data-path");
  if (std::filesystem::is_directory(a.data_path)) {
    train = pick(a.data_path, "train");
    SPARQ_CHECK_AS(InputError, !train.empty(), "'{}' has no train.bin, train.tsv or train.npz", a.data_path);
    if (test.empty()) test = pick(a.data_path, "test");
    d.teacher = read_teacher(a.data_path);
  } else {
    SPARQ_CHECK_AS(InputError, std::filesystem::exists(a.data_path), "cannot open '{}': no such file",
                   a.data_path);
  }
  std::size_t bad = 0;
  if (a.stream) {
    SPARQ_CHECK_AS(InputError, !is_binary_records(train) && !is_zip(train),
                   "--stream reads TSV; '{}' is binary or .npz (drop --stream)", train);
    d.stream_files = {train};
    d.stream_end = count_lines(train);
  } else {
    d.train = RecordSet::load(train, tsv, &bad);
  }
  d.bad_lines += bad;
  if (!test.empty()) {
    d.test = RecordSet::load(test, tsv, &bad);
    d.bad_lines += bad;
  }
}

// --data-generation synthetic: teacher-labelled, or read from --data-cache.
void generate_synthetic(const TrainArgs& a, TrainData& d) {
  if (!a.data_cache.empty() && std::filesystem::exists(a.data_cache + "/train.bin")) {
    d.train = RecordSet(MappedRecords(a.data_cache + "/train.bin"));
    d.test = RecordSet(MappedRecords(a.data_cache + "/test.bin"));
    d.teacher = read_teacher(a.data_cache);
  } else {
    TeacherOptions to;
    to.seed = a.seed;
    Teacher teacher(to, synthetic_options(a.seed, a.zipf, a.cardinalities));
    std::vector<CriteoRecord> train, test;
    std::vector<float> p, y;
    train.reserve(a.data_size);
    teacher.generate(0, a.data_size, train, nullptr, a.threads);
    teacher.generate(kTestIndexBase, a.num_test, test, &p, a.threads);
    for (const auto& r : test) y.push_back(r.label);
    d.teacher = score_teacher(p, y);
    if (!a.data_cache.empty()) {
      std::filesystem::create_directories(a.data_cache);
      BinaryWriter(a.data_cache + "/train.bin").write(train);
      BinaryWriter(a.data_cache + "/test.bin").write(test);
      nlohmann::json j;
      j["teacher_test"] = {{"loss", d.teacher->loss}, {"accuracy", d.teacher->accuracy}, {"auc", d.teacher->auc},
                           {"positives", d.teacher->positives}};
      std::ofstream(a.data_cache + "/teacher.json") << j.dump(2) << "\n";
    }
    d.train = RecordSet(std::move(train));
    d.test = RecordSet(std::move(test));
  }
}

// --data-generation random: uniform ids, uniform dense in [0, 1), coin-flip
// labels: no signal, for speed only (as the reference's random mode).
void generate_random(const TrainArgs& a, TrainData& d) {
  check_no_synthetic_flags(a, "--data-generation random");
  const std::size_t n = (a.num_batches ? a.num_batches : 100) * a.batch;
  std::vector<CriteoRecord> v(n);
  Rng rng(a.seed, 0xd47a);
  for (auto& r : v) {
    r.label = rng.uniform() < 0.5 ? 1.f : 0.f;
    for (auto& x : r.dense) x = static_cast<float>(rng.uniform());
    for (auto& s : r.sparse) s = static_cast<std::uint32_t>(rng.next_u64());
  }
  d.train = RecordSet(std::move(v));
}

}  // namespace

TrainData load_data(const TrainArgs& a) {
  TrainData d;
  const auto t0 = Clock::now();
  TsvOptions tsv;
  tsv.skip_bad_lines = a.skip_bad_lines;
  SPARQ_CHECK_AS(InputError, a.sub_sample_rate == 0 || !a.raw_data_file.empty(),
                 "--data-sub-sample-rate drops negatives while reading --raw-data-file");
  if (!a.raw_data_file.empty()) load_raw_criteo(a, tsv, d);
  else if (a.data_generation == "dataset") load_files(a, tsv, d);
  else if (a.data_generation == "synthetic") generate_synthetic(a, d);
  else if (a.data_generation == "random") generate_random(a, d);
  else SPARQ_THROW(InputError, "--data-generation must be dataset, synthetic or random, got '{}'", a.data_generation);
  d.load_secs = seconds_since(t0);
  return d;
}

}  // namespace sparq::cli
