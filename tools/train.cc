// `sparq train`: the DLRM reference's flags and output lines, on one rank or
// data parallel (--ranks N threads, or one rank per mpiexec process).
//
//   Finished training it i/n of epoch e, X ms/it, loss L, S samples/s (data .. fwd .. bwd .. opt .. ms/it)
//   Testing at - i/n of epoch e, loss L, accuracy A %, auc U, best auc B
//
// Data: --data-path DIR (train.{bin,tsv} and test.{bin,tsv}, as written by
// `sparq gen-data` / `sparq convert`) or FILE (+ --test-data-path), or
// --data-generation synthetic (teacher-labelled, generated in memory or read
// from / written to --data-cache DIR) or random (uniform, like the
// reference's --data-generation=random: for speed measurements only).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include "sparq/coll/allreduce.h"
#include "sparq/coll/patterns.h"
#include "sparq/core/error.h"
#include "sparq/core/units.h"
#include "sparq/train/data_parallel.h"
#include "sparq/train/verify.h"
#include "sparq/transport/launch.h"
#include "sparq/data/dataset.h"
#include "sparq/data/random.h"
#include "sparq/model/blas.h"
#include "sparq/model/checkpoint.h"
#include "sparq/model/dlrm.h"
#include "sparq/model/loss.h"
#include "sparq/model/metrics.h"
#include "sparq/model/optimizer.h"
#include "sparq/model/parallel.h"
#include "sparq/model/teacher.h"
#include "tools/commands.h"
#include "tools/synthetic_data.h"

namespace sparq::cli {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct TrainArgs {
  std::size_t emb_dim = 16;
  std::string mlp_bot = "13-512-256-64-16";
  std::string mlp_top = "512-256-1";
  std::string emb_size = "100000";
  std::size_t batch = 128;
  std::size_t test_batch = 16384;
  double lr = 0.1;
  std::string emb_optim = "sgd";
  std::size_t nepochs = 1;
  std::size_t num_batches = 0;  // per epoch; 0 = all
  std::size_t print_freq = 1000;
  long test_freq = -1;          // iterations; -1 = end of each epoch only
  std::string data_path, test_data_path;
  std::string data_generation = "dataset";
  std::size_t data_size = 1000000;
  std::size_t num_test = 100000;
  std::string data_cache;
  double zipf = 1.1;
  std::string cardinalities;
  std::uint64_t seed = 1;
  int threads = 2;
  int compute_threads = 0;  // 0 = --threads
  bool skip_bad_lines = false;
  bool no_shuffle = false;
  bool stream = false;
  std::size_t shuffle_buffer = 100000;
  std::string metrics, save, load;
  // Data parallelism: --mini-batch-size is the global batch (the reference's
  // convention), split evenly over the ranks.
  int ranks = 0;
  std::string dp_codec = "none";
  std::string dp_allreduce = "auto";
  std::string fuse_bytes = "0";
  bool no_overlap = false;
  std::string emb_placement = "replicated";
  std::string emb_codec_fwd = "fp32", emb_codec_bwd = "fp32";
  std::size_t verify_freq = 1000;
  double timeout_s = 300;
};

struct Data {
  RecordSet train, test;
  std::string stream_file;   // --stream: the TSV to stream each epoch (train stays empty)
  std::size_t stream_lines = 0;
  std::optional<TeacherScore> teacher;  // the ceiling, when the data has one
  std::size_t bad_lines = 0;
  double load_secs = 0;
};

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

// --stream: batches straight from the TSV through the background parser and a
// shuffle buffer (seeded by seed and epoch), for data sets larger than memory.
class StreamBatches {
 public:
  StreamBatches(const std::string& file, const TrainArgs& a, std::size_t epoch) {
    TsvOptions o;
    o.skip_bad_lines = a.skip_bad_lines;
    o.shuffle_buffer = a.no_shuffle ? 0 : a.shuffle_buffer;
    o.seed = a.seed * 1000003 + epoch;
    o.shard_block = a.batch;
    stream_ = std::make_unique<TsvStream>(std::vector<std::string>{file}, o);
  }
  // False when the stream has no record left.
  bool next(std::size_t batch, std::span<const std::size_t> rows, Batch& out) {
    recs_.clear();
    CriteoRecord r;
    while (recs_.size() < batch && stream_->next(r)) recs_.push_back(r);
    if (recs_.empty()) return false;
    make_batch(recs_, {}, 0, recs_.size(), rows, out);
    return true;
  }
  std::size_t bad_lines() const { return stream_->bad_lines(); }

 private:
  std::unique_ptr<TsvStream> stream_;
  std::vector<CriteoRecord> recs_;
};

std::string pick(const std::string& dir, const std::string& stem) {
  for (const char* ext : {".bin", ".tsv"}) {
    const auto p = dir + "/" + stem + ext;
    if (std::filesystem::exists(p)) return p;
  }
  return {};
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
    if (std::filesystem::is_directory(a.data_path)) {
      train = pick(a.data_path, "train");
      SPARQ_CHECK_AS(InputError, !train.empty(), "'{}' has no train.bin or train.tsv", a.data_path);
      if (test.empty()) test = pick(a.data_path, "test");
      d.teacher = read_teacher(a.data_path);
    } else {
      SPARQ_CHECK_AS(InputError, std::filesystem::exists(a.data_path), "cannot open '{}': no such file",
                     a.data_path);
    }
    std::size_t bad = 0;
    if (a.stream) {
      SPARQ_CHECK_AS(InputError, !is_binary_records(train),
                     "--stream reads TSV; '{}' is binary (memory-mapped anyway: drop --stream)", train);
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
  d.load_secs = since(t0);
  return d;
}

struct EvalResult {
  double loss = 0, accuracy = 0, auc = 0.5;
};

EvalResult evaluate(Dlrm<float>& model, const RecordSet& test, const DlrmConfig& cfg, std::size_t batch) {
  BatchPlan plan(test.size(), {.batch = batch, .shuffle = false});
  std::vector<float> scores, labels;
  scores.reserve(test.size());
  labels.reserve(test.size());
  Batch b;
  double loss_sum = 0;
  for (std::size_t i = 0; i < plan.num_batches(); ++i) {
    plan.fill(i, test.records(), cfg.table_rows, b);
    const auto z = model.forward(b);
    loss_sum += bce_with_logits<float>(z, b.labels, {}) * static_cast<double>(b.size);
    for (std::size_t k = 0; k < b.size; ++k) {
      scores.push_back(sigmoid(z[k]));
      labels.push_back(b.labels[k]);
    }
  }
  EvalResult r;
  if (scores.empty()) return r;
  r.loss = loss_sum / static_cast<double>(scores.size());
  r.accuracy = accuracy(scores, labels);
  r.auc = roc_auc(scores, labels);
  return r;
}

std::string checkpoint_meta(std::size_t step, const TrainArgs& a, const DlrmConfig& cfg) {
  nlohmann::json j;
  j["step"] = step;
  j["seed"] = a.seed;
  j["model"] = cfg.describe();
  j["embedding_optimizer"] = a.emb_optim;
  return j.dump();
}

void train_rank(Transport& t, const TrainArgs& a, const DlrmConfig& cfg, const Data& data,
                const DataParallelOptions& dpo);

// The alltoall codecs of table-wise embeddings: fp32 or row-wise q8/q4/q2.
Codec emb_codec(const std::string& s, const char* flag) {
  SPARQ_CHECK_AS(InputError, s == "fp32" || s == "q8" || s == "q4" || s == "q2", "{} must be fp32, q8, q4 or q2, got '{}'",
                 flag, s);
  return parse_codec(s);
}

void run_train(const TrainArgs& a) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines appear as they happen, also when piped
  SPARQ_CHECK_AS(InputError, a.threads >= 1, "--threads must be >= 1");
  SPARQ_CHECK_AS(InputError, a.batch >= 1, "--mini-batch-size must be >= 1");
  set_blas_threads(a.threads);
  set_compute_threads(a.compute_threads > 0 ? a.compute_threads : a.threads);
  DlrmConfig cfg;
  cfg.emb_dim = a.emb_dim;
  cfg.bot_mlp = parse_dash_list(a.mlp_bot);
  cfg.top_mlp = parse_dash_list(a.mlp_top);
  cfg.table_rows = per_table(a.emb_size, "--arch-embedding-size");
  SPARQ_CHECK_AS(InputError, cfg.num_dense() == kCriteoDense, "--arch-mlp-bot must start with {} (dense features)",
                 kCriteoDense);
  cfg.validate();

  DataParallelOptions dpo;
  dpo.codec = parse_dp_codec(a.dp_codec, a.dp_allreduce);
  dpo.placement = parse_emb_placement(a.emb_placement);
  dpo.emb_fwd = emb_codec(a.emb_codec_fwd, "--emb-codec-fwd");
  dpo.emb_bwd = emb_codec(a.emb_codec_bwd, "--emb-codec-bwd");
  SPARQ_CHECK_AS(InputError, dpo.placement == EmbPlacement::TableWise || (a.emb_codec_fwd == "fp32" && a.emb_codec_bwd == "fp32"),
                 "--emb-codec-fwd/--emb-codec-bwd quantize the table-wise alltoall: they need --emb-placement table-wise");
  dpo.overlap = !a.no_overlap;
  dpo.fuse_bytes = parse_bytes(a.fuse_bytes);
  const int world = a.ranks > 0 ? a.ranks : mpiexec_world_size();
  if (world > 1) {
    SPARQ_CHECK_AS(InputError, !a.stream, "--stream with more than one rank is not built yet");
    if (a.ranks > 1) {  // ranks are threads of this process: one core each
      set_blas_threads(1);
      set_compute_threads(1);
    }
  }
  // Every process loads the data once; in-process ranks share it (read only).
  const Data data = load_data(a, cfg);
  LaunchOptions lo;
  lo.ranks = a.ranks;
  lo.timeout = std::chrono::milliseconds(static_cast<long long>(a.timeout_s * 1000));
  launch(lo, [&](Transport& t) { train_rank(t, a, cfg, data, dpo); });
}

// What this rank put on the wire per entity, cumulative: the table printed
// at the end of a distributed run, and its lines in --metrics. Bytes come
// from the transport counters, against the fp32 exchange of the same data.
struct Accounting {
  ExchangeStats w_grad, emb_fwd, emb_bwd, emb_grad;
  template <class S>  // DpStepStats or Accounting
  void add(const S& s) {
    w_grad += s.w_grad, emb_fwd += s.emb_fwd, emb_bwd += s.emb_bwd, emb_grad += s.emb_grad;
  }
  std::vector<std::pair<const char*, const ExchangeStats*>> entities(EmbPlacement p) const {
    if (p == EmbPlacement::TableWise) return {{"W_grad", &w_grad}, {"emb_fwd", &emb_fwd}, {"emb_bwd", &emb_bwd}};
    return {{"W_grad", &w_grad}, {"emb_grad", &emb_grad}};
  }
  double wait_seconds() const {
    return w_grad.wait_seconds + emb_fwd.wait_seconds + emb_bwd.wait_seconds + emb_grad.wait_seconds;
  }
};

double ratio(const ExchangeStats& x) {
  return x.bytes_sent ? static_cast<double>(x.dense_bytes) / static_cast<double>(x.bytes_sent) : 0;
}

template <class Say, class Emit>
void report_accounting(const Accounting& acct, std::size_t steps, const TrainArgs& a, const DataParallelOptions& dpo,
                       Say& say, Emit& emit) {
  say(fmt::format("accounting (rank 0, {} steps; --dp-codec {}, --emb-placement {}{}):\n", steps, dpo.codec.text,
                  emb_placement_name(dpo.placement),
                  dpo.placement == EmbPlacement::TableWise
                      ? fmt::format(", --emb-codec-fwd {} --emb-codec-bwd {}", a.emb_codec_fwd, a.emb_codec_bwd)
                      : ""));
  say(fmt::format("{:>9} {:>14} {:>14} {:>16} {:>8} {:>8} {:>11} {:>9} {:>9}\n", "entity", "bytes/step",
                  "bytes_sent", "fp32_bytes", "ratio", "kept_%", "compress_s", "comm_s", "wait_s"));
  for (const auto& [name, x] : acct.entities(dpo.placement)) {
    const double per_step = steps ? static_cast<double>(x->bytes_sent) / static_cast<double>(steps) : 0;
    const double kept = x->values ? 100.0 * static_cast<double>(x->kept) / static_cast<double>(x->values) : 0;
    say(fmt::format("{:>9} {:>14.0f} {:>14} {:>16} {:>7.2f}x {:>8.3f} {:>11.3f} {:>9.3f} {:>9.3f}{}\n", name,
                    per_step, x->bytes_sent, x->dense_bytes, ratio(*x), kept, x->compress_seconds, x->comm_seconds,
                    x->wait_seconds, x->counted ? "" : "  (native MPI: bytes not counted)"));
    emit({{"event", "accounting"}, {"entity", name}, {"steps", steps}, {"bytes_sent", x->bytes_sent},
          {"bytes_per_step", per_step}, {"dense_bytes", x->dense_bytes}, {"ratio", ratio(*x)},
          {"kept_percent", kept}, {"compress_s", x->compress_seconds}, {"comm_s", x->comm_seconds}, {"wait_s", x->wait_seconds},
          {"counted", x->counted}});
  }
}

// The training loop of one rank (all of it when there is one rank).
void train_rank(Transport& t, const TrainArgs& a, const DlrmConfig& cfg, const Data& data,
                const DataParallelOptions& dpo) {
  const int nranks = t.size();
  const bool lead = t.rank() == 0;  // prints, tests, writes metrics and checkpoints
  auto say = [&](const std::string& line) {
    if (lead) std::fputs(line.c_str(), stdout);
  };
  std::unique_ptr<std::ofstream> metrics;
  if (lead && !a.metrics.empty()) {
    metrics = std::make_unique<std::ofstream>(a.metrics);
    SPARQ_CHECK_AS(InputError, metrics->good(), "cannot create '{}'", a.metrics);
  }
  auto emit = [&](const nlohmann::json& j) {
    if (metrics) *metrics << j.dump() << "\n" << std::flush;
  };

  if (!data.stream_file.empty())
    say(fmt::format("data: streaming {} ({} lines, shuffle buffer {})\n", data.stream_file, data.stream_lines,
               a.no_shuffle ? 0 : a.shuffle_buffer));
  say(fmt::format("data: {} train, {} test samples ({:.2f} s to load/generate){}\n", data.train.size(), data.test.size(),
             data.load_secs, a.skip_bad_lines ? fmt::format(", skipped {} bad lines", data.bad_lines) : ""));
  if (data.teacher)
    say(fmt::format("teacher (ceiling): test loss {:.6f}, accuracy {:.3f} %, auc {:.4f}\n", data.teacher->loss,
               100 * data.teacher->accuracy, data.teacher->auc));
  SPARQ_CHECK_AS(InputError, data.train.size() > 0 || data.stream_lines > 0, "no training samples");

  Dlrm<float> model(cfg, a.seed);
  OptimizerOptions oo;
  oo.lr = a.lr;
  oo.embedding = parse_embedding_optim(a.emb_optim);
  Optimizer<float> opt(oo, model);
  std::size_t rows = 0;
  for (auto r : cfg.table_rows) rows += r;
  say(fmt::format("model: {} ({} dense parameters, {} embedding rows), lr {}, embedding optimizer {}, threads {}\n",
             cfg.describe(), model.dense().size(), rows, a.lr, a.emb_optim, a.threads));

  const bool streaming = !data.stream_file.empty();
  BatchPlan plan(streaming ? data.stream_lines : data.train.size(),
                 {.batch = a.batch, .shuffle = !a.no_shuffle, .seed = a.seed});
  const std::size_t nbatches = a.num_batches ? std::min(a.num_batches, plan.num_batches()) : plan.num_batches();
  std::unique_ptr<StreamBatches> streamer;
  std::size_t stream_bad = 0;
  std::size_t step = 0;
  if (!a.load.empty()) {
    const auto meta = nlohmann::json::parse(load_checkpoint(a.load, model, opt), nullptr, false);
    SPARQ_CHECK_AS(InputError, !meta.is_discarded() && meta.contains("step"), "'{}': checkpoint without a step", a.load);
    step = meta["step"];
    say(fmt::format("loaded {} at step {} (epoch {}, it {})\n", a.load, step, step / nbatches, step % nbatches));
  }

  if (nranks > 1)
    say(fmt::format("data parallel: {} ranks, --dp-codec {}, --emb-placement {}, overlap {}, fuse {} bytes\n", nranks,
                    dpo.codec.text, emb_placement_name(dpo.placement), dpo.overlap ? "on" : "off", dpo.fuse_bytes));
  Batch batch;
  compress::ErrorFeedbackStore residuals;
  DataParallel dp(t, model, opt, dpo, residuals);
  Accounting acct, acct_print;  // this rank's traffic: cumulative, since the last print
  double t_comm = 0, tot_comm = 0;
  double t_data = 0, t_fwd = 0, t_bwd = 0, t_opt = 0, t_iter = 0, loss_sum = 0;  // since the last print
  double tot_data = 0, tot_fwd = 0, tot_bwd = 0, tot_opt = 0;
  std::size_t its = 0, samples = 0, tot_samples = 0, local_samples = 0;
  // Replicas must stay bit-identical: hash every parameter, compare across ranks.
  auto verify_model = [&](std::size_t at) { verify_replica_hash(t, dp.replica_hash(), at); };
  double best_auc = 0;
  EvalResult last_eval;
  bool evaluated = false;
  const auto train_start = Clock::now();
  auto test_now = [&](std::size_t it, std::size_t epoch) {
    if (data.test.size() == 0) return;
    dp.gather_model(0);  // table-wise: the tables of the other ranks
    if (!lead) return;   // the dense replicas are identical: one rank tests
    last_eval = evaluate(model, data.test, cfg, a.test_batch);
    evaluated = true;
    best_auc = std::max(best_auc, last_eval.auc);
    say(fmt::format("Testing at - {}/{} of epoch {}, loss {:.6f}, accuracy {:.3f} %, auc {:.4f}, best auc {:.4f}\n", it,
               nbatches, epoch, last_eval.loss, 100 * last_eval.accuracy, last_eval.auc, best_auc));
    emit({{"event", "test"}, {"epoch", epoch}, {"it", it}, {"nbatches", nbatches}, {"step", epoch * nbatches + it},
          {"loss", last_eval.loss}, {"accuracy", last_eval.accuracy}, {"auc", last_eval.auc}});
  };

  for (std::size_t epoch = step / nbatches; epoch < a.nepochs; ++epoch) {
    if (streaming) {
      if (streamer) stream_bad += streamer->bad_lines();
      streamer = std::make_unique<StreamBatches>(data.stream_file, a, epoch);
      for (std::size_t k = 0; k < step % nbatches; ++k)  // resume: skip what this epoch already trained on
        streamer->next(a.batch, cfg.table_rows, batch);
    } else {
      plan.start_epoch(epoch);
    }
    for (std::size_t it = step % nbatches; it < nbatches; ++it) {
      auto t0 = Clock::now();
      if (streaming) {
        if (!streamer->next(a.batch, cfg.table_rows, batch)) break;  // fewer records than lines (bad lines)
      } else {
        // Every rank assembles the global batch; DataParallel trains on its share.
        plan.fill(it, data.train.records(), cfg.table_rows, batch);
      }
      const std::size_t global_size = batch.size, local_size = pattern::Partition{global_size, nranks}.len(t.rank());
      t_data += since(t0);
      const DpStepStats s = dp.step(batch, step);
      loss_sum += s.loss * static_cast<double>(local_size);
      t_fwd += s.forward_s;
      t_bwd += s.backward_s;
      t_opt += s.optimizer_s;
      acct_print.add(s);
      t_iter += since(t0);
      ++its;
      samples += global_size;
      local_samples += local_size;
      ++step;
      if (nranks > 1 && a.verify_freq > 0 && step % a.verify_freq == 0) verify_model(step);
      if ((it + 1) % a.print_freq == 0 || it + 1 == nbatches) {
        t_comm = acct_print.wait_seconds();
        // Wall time of the iterations themselves: printing and testing stay out of ms/it.
        const double wall = t_iter;
        const double ms = 1e3 * wall / static_cast<double>(its);
        // The global batch's mean loss: every rank's sum over its samples.
        double sums[2] = {loss_sum, static_cast<double>(local_samples)};
        if (nranks > 1) allreduce(t, std::span<double>(sums));
        const double loss = sums[0] / sums[1];
        const double n = static_cast<double>(its);
        say(fmt::format(
            "Finished training it {}/{} of epoch {}, {:.2f} ms/it, loss {:.6f}, {:.0f} samples/s (data {:.2f} fwd "
            "{:.2f} bwd {:.2f} opt {:.2f}{} ms/it)\n",
            it + 1, nbatches, epoch, ms, loss, static_cast<double>(samples) / wall, 1e3 * t_data / n, 1e3 * t_fwd / n,
            1e3 * t_bwd / n, 1e3 * t_opt / n, nranks > 1 ? fmt::format(" comm wait {:.2f}", 1e3 * t_comm / n) : ""));
        nlohmann::json traffic;  // bytes per step since the last print, per entity
        for (const auto& [name, x] : acct_print.entities(dpo.placement))
          traffic[name] = {{"bytes_per_step", static_cast<double>(x->bytes_sent) / n},
                           {"dense_bytes_per_step", static_cast<double>(x->dense_bytes) / n}, {"ratio", ratio(*x)}};
        emit({{"event", "train"}, {"epoch", epoch}, {"it", it + 1}, {"nbatches", nbatches}, {"step", step},
              {"loss", loss}, {"ms_per_it", ms}, {"samples_per_s", static_cast<double>(samples) / wall},
              {"phase_ms", {{"data", 1e3 * t_data / n}, {"forward", 1e3 * t_fwd / n},
                            {"backward", 1e3 * t_bwd / n}, {"optimizer", 1e3 * t_opt / n},
                            {"comm_wait", 1e3 * t_comm / n}}},
              {"traffic", traffic}});
        acct.add(acct_print);
        acct_print = {};
        tot_data += t_data, tot_fwd += t_fwd, tot_bwd += t_bwd, tot_opt += t_opt, tot_comm += t_comm;
        tot_samples += samples;
        t_data = t_fwd = t_bwd = t_opt = t_comm = t_iter = loss_sum = 0;
        its = samples = local_samples = 0;
      }
      if (a.test_freq > 0 && (it + 1) % static_cast<std::size_t>(a.test_freq) == 0 && it + 1 != nbatches) {
        test_now(it + 1, epoch);
      }
    }
    test_now(nbatches, epoch);
  }
  const double train_wall = since(train_start);
  if (tot_samples > 0) {
    const double compute = tot_fwd + tot_bwd + tot_opt + tot_comm;
    const double flops = 6.0 * static_cast<double>(model.mlp_macs_per_sample()) * static_cast<double>(tot_samples);
    say(fmt::format(
        "summary: {} samples, compute (fwd+loss+bwd+update) {:.0f} samples/s, with data assembly {:.0f} samples/s "
        "(data path {:.1f} % of step time), MLP {:.1f} GFLOP/s over fwd+bwd\n",
        tot_samples, static_cast<double>(tot_samples) / compute,
        static_cast<double>(tot_samples) / (compute + tot_data), 100 * tot_data / (compute + tot_data),
        flops / (tot_fwd + tot_bwd) / 1e9));
    emit({{"event", "summary"}, {"samples", tot_samples}, {"train_wall_s", train_wall},
          {"compute_samples_per_s", static_cast<double>(tot_samples) / compute},
          {"samples_per_s_with_data", static_cast<double>(tot_samples) / (compute + tot_data)},
          {"load_s", data.load_secs}, {"bad_lines", data.bad_lines}});
  }
  if (data.teacher && evaluated)
    say(fmt::format("teacher gap: teacher auc {:.4f}, model auc {:.4f}, gap {:.4f}\n", data.teacher->auc, last_eval.auc,
               data.teacher->auc - last_eval.auc));
  if (streamer) stream_bad += streamer->bad_lines();
  if (a.skip_bad_lines) say(fmt::format("skipped {} bad lines\n", data.bad_lines + stream_bad));
  if (nranks > 1) {
    verify_model(step);
    report_accounting(acct, step, a, dpo, say, emit);
  }
  if (!a.save.empty()) dp.gather_model(0);
  if (lead && !a.save.empty()) {
    save_checkpoint(a.save, model, opt, checkpoint_meta(step, a, cfg));
    say(fmt::format("saved {} at step {}\n", a.save, step));
  }
}

}  // namespace

void add_train(CLI::App& app, Run& run) {
  auto a = std::make_shared<TrainArgs>();
  auto* c = app.add_subcommand("train", "Train DLRM with the reference's flags (one rank, or data parallel)");
  c->add_option("--arch-sparse-feature-size", a->emb_dim, "Embedding dimension")->capture_default_str();
  c->add_option("--arch-mlp-bot", a->mlp_bot, "Bottom MLP widths, input first")->capture_default_str();
  c->add_option("--arch-mlp-top", a->mlp_top, "Top MLP widths after the interaction, ending in 1")->capture_default_str();
  c->add_option("--arch-embedding-size", a->emb_size, "Rows per table: 26 dash-separated or one for all")
      ->capture_default_str();
  c->add_option("--mini-batch-size", a->batch, "Training batch size")->capture_default_str();
  c->add_option("--test-mini-batch-size", a->test_batch, "Evaluation batch size")->capture_default_str();
  c->add_option("--learning-rate", a->lr, "SGD learning rate (dense and embeddings)")->capture_default_str();
  c->add_option("--embedding-optimizer", a->emb_optim, "sgd or rowwise-adagrad")->capture_default_str();
  c->add_option("--nepochs", a->nepochs, "Epochs")->capture_default_str();
  c->add_option("--num-batches", a->num_batches, "Batches per epoch (0 = the whole training set)")->capture_default_str();
  c->add_option("--print-freq", a->print_freq, "Print every N iterations")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--test-freq", a->test_freq, "Test every N iterations (-1: at the end of each epoch)")
      ->capture_default_str();
  c->add_option("--data-path", a->data_path, "Directory with train/test .bin/.tsv, or a training file");
  c->add_option("--test-data-path", a->test_data_path, "Test file (when --data-path is a file)");
  c->add_option("--data-generation", a->data_generation, "dataset, synthetic or random")->capture_default_str();
  c->add_option("--data-size", a->data_size, "Synthetic training samples")->capture_default_str();
  c->add_option("--num-test", a->num_test, "Synthetic test samples")->capture_default_str();
  c->add_option("--data-cache", a->data_cache, "Synthetic: directory to reuse or write the generated data (binary)");
  c->add_option("--zipf", a->zipf, "Synthetic: Zipf exponent")->capture_default_str();
  c->add_option("--cardinalities", a->cardinalities, "Synthetic: distinct values per table");
  c->add_option("--seed", a->seed, "Seed of model init, data order and synthetic data")->capture_default_str();
  c->add_option("--threads", a->threads, "BLAS threads")->capture_default_str();
  c->add_option("--compute-threads", a->compute_threads,
                "Threads for the non-GEMM loops (interaction, embeddings, SGD; 0 = --threads); results do not "
                "depend on it")
      ->capture_default_str();
  c->add_flag("--skip-bad-lines", a->skip_bad_lines, "Skip and count malformed TSV lines");
  c->add_flag("--no-shuffle", a->no_shuffle, "Keep the training set's order");
  c->add_flag("--stream", a->stream,
              "Stream a TSV training file each epoch (background parser + shuffle buffer) instead of loading it");
  c->add_option("--shuffle-buffer", a->shuffle_buffer, "--stream: shuffle buffer in records")->capture_default_str();
  c->add_option("--metrics", a->metrics, "Write JSON lines (one per print/test event) to this file");
  c->add_option("--save", a->save, "Save a checkpoint here at the end");
  c->add_option("--load", a->load, "Resume from this checkpoint");
  c->add_option("--ranks", a->ranks,
                "Data parallel over N in-process ranks (threads); under mpiexec every process is a rank. "
                "--mini-batch-size is the global batch")
      ->check(CLI::PositiveNumber);
  c->add_option("--dp-codec", a->dp_codec,
                "Dense gradient exchange: none, dct:ETA,L (DCT-DP), topk:K/B, q8|q4|q2[+ec], qsgd:BITS")
      ->capture_default_str();
  c->add_option("--dp-allreduce", a->dp_allreduce,
                "Collective of the --dp-codec: auto, or for none ring|recursive-doubling|rabenseifner|native, for q* "
                "ring|recursive-doubling, for dct/topk ssar_recursive_double|ssar_split_allgather|"
                "dsar_split_allgather|dense")
      ->capture_default_str();
  c->add_option("--fuse-bytes", a->fuse_bytes,
                "Exchange adjacent layers' gradients together until a group holds this many bytes (e.g. 1MiB; 0: "
                "every tensor alone)")
      ->capture_default_str();
  c->add_flag("--no-overlap", a->no_overlap,
              "Exchange the dense gradients after the backward pass instead of layer by layer during it");
  c->add_option("--emb-placement", a->emb_placement,
                "replicated (sparse allreduce of embedding gradients) or table-wise (tables spread over ranks, "
                "alltoall of lookups and their gradients)")
      ->capture_default_str();
  c->add_option("--emb-codec-fwd", a->emb_codec_fwd, "Table-wise: codec of the lookups alltoall: fp32, q8, q4, q2")
      ->capture_default_str();
  c->add_option("--emb-codec-bwd", a->emb_codec_bwd, "Table-wise: codec of the gradients alltoall: fp32, q8, q4, q2")
      ->capture_default_str();
  c->add_option("--verify-freq", a->verify_freq, "Check every N steps that all ranks hold identical parameters")
      ->capture_default_str();
  c->add_option("--timeout", a->timeout_s, "Seconds a rank waits for a peer before failing")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  c->callback([a, &run] { run = [a] { run_train(*a); }; });
}

}  // namespace sparq::cli
