#include "tools/train_data.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "sparq/core/error.h"
#include "sparq/data/npz.h"
#include "sparq/data/random.h"
#include "sparq/transport/transport.h"
#include "tools/synthetic_data.h"

namespace sparq::cli {

// Lines of a file (a last line without '\n' counts): one memchr pass, far
// cheaper than parsing, so a streamed epoch knows its number of batches.
std::size_t count_lines(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  SPARQ_CHECK_AS(InputError, f != nullptr, "cannot open '{}'", path);
  std::vector<char> buf(1 << 20);
  std::size_t n = 0, got;
  char last = '\n';
  while ((got = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
    for (const char* p = buf.data(); (p = static_cast<const char*>(std::memchr(p, '\n', buf.data() + got - p)));
         ++p)
      ++n;
    last = buf[got - 1];
  }
  std::fclose(f);
  return n + (last != '\n' ? 1 : 0);
}

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

Data load_data(const TrainArgs& a, const DlrmConfig& cfg) {
  Data d;
  const auto t0 = Clock::now();
  TsvOptions tsv;
  tsv.skip_bad_lines = a.skip_bad_lines;
  if (a.data_generation == "dataset") {
    SPARQ_CHECK_AS(InputError, !a.data_path.empty(), "--data-path is required with --data-generation dataset");
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
      d.stream_file = train;
      d.stream_lines = count_lines(train);
    } else {
      d.train = RecordSet::load(train, tsv, &bad);
    }
    d.bad_lines += bad;
    if (!test.empty()) {
      d.test = RecordSet::load(test, tsv, &bad);
      d.bad_lines += bad;
    }
  } else if (a.data_generation == "synthetic") {
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
      teacher.generate(0, a.data_size, &train, nullptr, nullptr, a.threads);
      teacher.generate(kTestIndexBase, a.num_test, &test, &p, nullptr, a.threads);
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
  } else if (a.data_generation == "random") {
    // Uniform ids, uniform dense in [0, 1), coin-flip labels: no signal, for
    // speed only (as the reference's random mode).
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
  } else {
    SPARQ_THROW(InputError, "--data-generation must be dataset, synthetic or random, got '{}'", a.data_generation);
  }
  (void)cfg;
  d.load_secs = seconds_since(t0);
  return d;
}

}  // namespace sparq::cli
