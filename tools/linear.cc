// `sparq linear`: linear models on naturally sparse data (SparCML's MPI-OPT):
// logistic regression or a linear SVM, mini-batch SGD over the sparse
// allreduce or coordinate descent over the sparse allgather, on libsvm files.
// One rank, --ranks P in-process (on a virtual clock with --net), or one
// rank per mpiexec process. Each rank reads only its shard of the files.
//
//   epoch e/E: train loss L accuracy A % | test loss L accuracy A % auc U | T ms: compute C, communication M, waiting W | sent S MB, dense D MB (Rx) | N steps, EXCHANGE, sum density X %
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <utility>

#include "sparq/coll/allgather.h"
#include "sparq/coll/allreduce.h"
#include "sparq/core/error.h"
#include "sparq/core/memory.h"
#include "sparq/data/libsvm.h"
#include "sparq/model/checkpoint.h"
#include "sparq/model/loss.h"
#include "sparq/model/parallel.h"
#include "sparq/train/linear_trainer.h"
#include "sparq/transport/launch.h"
#include "sparq/transport/local_transport.h"
#include "tools/cli_sink.h"
#include "tools/commands.h"
#include "tools/linear.h"

namespace sparq::cli {

namespace {

struct LinearArgs {
  std::string data_path, test_data_path, loss = "logistic", algo = "auto", exchange = "auto";
  std::size_t num_features = 0, epochs = 100, num_batches = 0;
  // Unset: the algorithm's default; set for the other algorithm: an error.
  std::optional<std::string> sgd_step;
  std::optional<std::size_t> batch, coords;
  std::optional<double> lr, lr_decay, l2;
  double tol = 1e-3, timeout_s = 300;
  bool bias = false, skip_bad_lines = false;
  int threads = 1, ranks = 0;
  std::uint64_t seed = 1;
  std::string net, auto_net, metrics, save, load;
};

// The defaults: logistic regression by truncated Newton (as liblinear's
// default solver; it needs no step size, and on URL-like rows, whose dense
// real-valued features coordinate descent zig-zags on, it converged in 9
// epochs where scd took 50: docs/results.md), the hinge loss by AdaGrad SGD; liblinear's
// regularisation (C = 1: l2 = 1/n, set once n is known) and a tolerance on
// the objective.
constexpr double kAdagradLr = 0.5, kPlainLr = 1.0;

// An option of another algorithm than the one that runs: an error, not ignored.
void refuse_other_algorithm(const LinearArgs& a, LinearAlgo algo) {
  const std::string_view name = linear_algo_name(algo);
  SPARQ_CHECK_AS(InputError, !a.coords || algo == LinearAlgo::Scd, "--coords is scd's block size; --algo {} takes none",
                 name);
  if (algo == LinearAlgo::Sgd) return;
  const std::pair<bool, const char*> sgd_only[] = {{a.sgd_step.has_value(), "--sgd-step"},
                                                   {a.batch.has_value(), "--mini-batch-size"},
                                                   {a.lr.has_value(), "--learning-rate"},
                                                   {a.lr_decay.has_value(), "--lr-decay"},
                                                   {a.threads > 1, "--threads"}};
  for (const auto& [given, flag] : sgd_only)
    SPARQ_CHECK_AS(InputError, !given,
                   "{} is sgd's; --algo {} takes Newton steps with a line search (give --algo sgd to use it)", flag,
                   name);
  SPARQ_CHECK_AS(InputError, algo == LinearAlgo::Scd || a.num_batches == 0,
                 "--num-batches times part of a pass (sgd's steps, scd's blocks); --algo newton takes whole Newton "
                 "steps");
}

LinearTrainOptions train_options(const LinearArgs& a) {
  LinearTrainOptions o;
  o.loss = parse_linear_loss(a.loss);
  o.algo = a.algo == "auto" ? (o.loss == LinearLoss::Logistic ? LinearAlgo::Newton : LinearAlgo::Sgd)
                            : parse_linear_algo(a.algo);
  refuse_other_algorithm(a, o.algo);
  o.sgd_step = parse_sgd_step(a.sgd_step.value_or("adagrad"));
  o.exchange = parse_linear_exchange(a.exchange);
  o.batch = a.batch.value_or(0), o.coords = a.coords.value_or(0);
  o.lr = a.lr.value_or(o.sgd_step == SgdStep::Adagrad ? kAdagradLr : kPlainLr), o.lr_decay = a.lr_decay.value_or(0);
  SPARQ_CHECK_AS(InputError, a.batch.value_or(1) >= 1 && a.coords.value_or(1) >= 1 && a.epochs >= 1,
                 "--mini-batch-size, --coords and --epochs must be >= 1");
  SPARQ_CHECK_AS(InputError, std::isfinite(o.lr) && o.lr > 0, "--learning-rate must be > 0, got {}", o.lr);
  SPARQ_CHECK_AS(InputError, std::isfinite(o.lr_decay) && o.lr_decay >= 0, "--lr-decay must be >= 0");
  SPARQ_CHECK_AS(InputError, !a.l2 || (std::isfinite(*a.l2) && *a.l2 >= 0), "--l2 must be >= 0");
  SPARQ_CHECK_AS(InputError, std::isfinite(a.tol) && a.tol >= 0, "--tol must be >= 0, got {}", a.tol);
  SPARQ_CHECK_AS(InputError, a.threads >= 1, "--threads must be >= 1");
  o.epochs = a.epochs, o.max_steps = a.num_batches, o.tol = a.tol, o.seed = a.seed;
  o.timeout = std::chrono::milliseconds(static_cast<long long>(a.timeout_s * 1000));
  const std::string plan = !a.auto_net.empty() ? a.auto_net : a.net;
  if (!plan.empty()) o.auto_rule.net = parse_net_model(plan);
  o.save = a.save;
  o.save_meta = {{"model", "linear"}, {"loss", a.loss}, {"algo", linear_algo_name(o.algo)}, {"bias", a.bias}};
  return o;
}

// newton's auto is the owner exchange: said as such.
std::string exchange_said(const LinearTrainOptions& o) {
  const std::string name = linear_exchange_name(o.exchange);
  return o.algo == LinearAlgo::Newton && name == "auto" ? "auto (owner-alltoall)" : name;
}

// What the run does, in words: the first line rank 0 prints.
std::string describe(Transport& t, const LinearArgs& a, const LinearTrainOptions& o, std::size_t features,
                     std::size_t rows) {
  const std::string algo =
      o.algo == LinearAlgo::Scd      ? std::string("scd (block Newton steps, line search)")
      : o.algo == LinearAlgo::Newton ? std::string("newton (truncated Newton, line search)")
                                     : fmt::format("sgd ({} step {:g}{})", o.sgd_step == SgdStep::Adagrad ? "adagrad" : "plain", o.lr,
                        o.lr_decay > 0 ? fmt::format(" / (1 + {:g} e)", o.lr_decay) : "");
  const std::string l2 = a.l2 ? fmt::format("l2 {:.3g}", o.l2)
                              : fmt::format("l2 {:.3g} (1/n, n = {}: liblinear's -c 1)", o.l2, rows);
  const std::string stop = o.tol > 0 ? fmt::format("until the objective changes by < {:g} of itself in an epoch, at most {} epochs", o.tol, o.epochs)
                                     : fmt::format("{} epochs", o.epochs);
  return fmt::format("linear: {} ranks ({}), {} features{}, loss {}, algo {}, {}, exchange {}, {}\n", t.size(),
                     t.name(), features, a.bias ? " (last: the bias)" : ", no bias (as liblinear's default; --bias adds one)",
                     a.loss, algo, l2, exchange_said(o), stop);
}

struct Shards {
  SparseRows train, test;
};

// Every rank reads its shard; the ranks agree on the feature count (the
// largest index of any shard, or --num-features) and the label convention.
Shards read_shards(Transport& t, const LinearArgs& a) {
  LibsvmOptions lo;
  lo.num_features = a.num_features, lo.skip_bad_lines = a.skip_bad_lines;
  lo.shard = t.rank(), lo.shards = t.size();
  LibsvmRead tr = read_libsvm(a.data_path, lo);
  // The max of each: the feature count, and the OR of the two label bits.
  std::int64_t agree[3] = {static_cast<std::int64_t>(tr.rows.num_features), tr.label_kinds & 1u, (tr.label_kinds >> 1) & 1u};
  allreduce(t, std::span<std::int64_t>(agree, 3), AllreduceOptions{.op = ReduceOp::Max});
  SPARQ_CHECK_AS(InputError, !(agree[1] && agree[2]),
                 "'{}' has labels 0 and -1: it mixes the 0/1 and -1/+1 conventions", a.data_path);
  Shards s;
  s.train = std::move(tr.rows);
  s.train.num_features = static_cast<std::size_t>(agree[0]);
  report_bad_lines(t, a.data_path, tr);
  if (!a.test_data_path.empty()) {
    lo.num_features = s.train.num_features;
    lo.drop_beyond = true;  // features the training data never had have weight 0
    LibsvmRead te = read_libsvm(a.test_data_path, lo);
    report_bad_lines(t, a.test_data_path, te);
    s.test = std::move(te.rows);
  }
  s.test.num_features = s.train.num_features;
  if (a.bias) {
    append_constant_feature(s.train);
    append_constant_feature(s.test);
  }
  return s;
}

// Every process's peak resident memory: one rank's under mpiexec, all the
// in-process ranks' together otherwise.
void report_peak_memory(Transport& t, TrainerSink& sink, bool in_process) {
  const auto mine = static_cast<std::int64_t>(peak_resident_memory());
  std::vector<std::int64_t> all(t.size());
  allgather(t, std::span<const std::int64_t>(&mine, 1), std::span<std::int64_t>(all));
  if (t.rank() != 0) return;
  if (in_process) {
    sink.line(fmt::format("peak memory {:.1f} MiB (one process, {} ranks)\n", mine / 1048576.0, t.size()));
    return;
  }
  const auto [lo, hi] = std::minmax_element(all.begin(), all.end());
  sink.line(fmt::format("peak memory per rank {:.1f} - {:.1f} MiB\n", *lo / 1048576.0, *hi / 1048576.0));
  sink.event({{"event", "memory"}, {"peak_rss_bytes_per_rank", all}});
}

void run_linear(const LinearArgs& a) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  SPARQ_CHECK_AS(InputError, !a.data_path.empty(), "--data-path is required (a libsvm file, plain or .gz)");
  const LinearTrainOptions base = train_options(a);
  LaunchOptions lo;
  lo.ranks = a.ranks;
  lo.timeout = base.timeout;
  if (!a.net.empty()) {
    SPARQ_CHECK_AS(InputError, a.ranks > 0 && launch_mode() == "local",
                   "--net emulates the network between in-process ranks: give --ranks P");
    lo.net = parse_net_model(a.net);
    lo.cpu_scale = 1;
  }
  set_compute_threads(a.ranks > 1 || lo.net ? 1 : a.threads);  // in-process ranks: a core each
  launch(lo, [&](Transport& t) {
    Shards s = read_shards(t, a);
    LinearModel model(s.train.num_features);
    if (!a.load.empty()) load_model(a.load, model);
    LinearTrainOptions o = base;
    auto rows = static_cast<std::int64_t>(s.train.rows());
    allreduce(t, std::span<std::int64_t>(&rows, 1));
    SPARQ_CHECK_AS(InputError, rows > 0, "'{}' has no rows", a.data_path);
    o.l2 = a.l2.value_or(1.0 / static_cast<double>(rows));
    o.save_meta["num_features"] = s.train.num_features;
    o.save_meta["l2"] = o.l2;
    CliSink sink(t.rank() == 0 ? a.metrics : "");
    if (t.rank() == 0) sink.line(describe(t, a, o, s.train.num_features, static_cast<std::size_t>(rows)));
    train_linear(t, model, s.train, s.test, o, sink);
    report_peak_memory(t, sink, a.ranks > 1);
  });
}

}  // namespace

void report_bad_lines(Transport& t, const std::string& path, const LibsvmRead& r) {
  std::int64_t counts[2] = {static_cast<std::int64_t>(r.bad_lines), static_cast<std::int64_t>(r.dropped)};
  allreduce(t, std::span<std::int64_t>(counts, 2));
  if (t.rank() != 0) return;
  if (counts[0] > 0)
    std::fputs(fmt::format("'{}': skipped {} bad lines{}\n", path, counts[0],
                           r.first_bad.empty() ? "" : " (rank 0's first: " + r.first_bad + ")")
                   .c_str(),
               stdout);
  if (counts[1] > 0)
    std::fputs(fmt::format("'{}': dropped {} entries of features the training data does not have\n", path, counts[1])
                   .c_str(),
               stdout);
}

void append_constant_feature(SparseRows& r) {
  const auto j = static_cast<std::uint32_t>(r.num_features);
  SparseRows out;
  out.num_features = r.num_features + 1;
  out.labels = std::move(r.labels);
  out.offsets.reserve(r.offsets.size());
  out.indices.reserve(r.nnz() + out.labels.size());
  out.values.reserve(r.nnz() + out.labels.size());
  for (std::size_t i = 0; i + 1 < r.offsets.size(); ++i) {
    out.indices.insert(out.indices.end(), r.indices.begin() + static_cast<std::ptrdiff_t>(r.offsets[i]),
                       r.indices.begin() + static_cast<std::ptrdiff_t>(r.offsets[i + 1]));
    out.values.insert(out.values.end(), r.values.begin() + static_cast<std::ptrdiff_t>(r.offsets[i]),
                      r.values.begin() + static_cast<std::ptrdiff_t>(r.offsets[i + 1]));
    out.indices.push_back(j);
    out.values.push_back(1.0f);
    out.offsets.push_back(out.indices.size());
  }
  r = std::move(out);
}

void load_model(const std::string& path, LinearModel& m) {
  std::vector<float> w;
  SPARQ_CHECK_AS(InputError, is_linear_model(load_weights_checkpoint(path, w)),
                 "'{}' is not a linear model (sparq linear --save writes one)", path);
  SPARQ_CHECK_AS(InputError, w.size() == m.dim(), "'{}' has {} weights, the data {} features (bias included)", path,
                 w.size(), m.dim());
  m.set_weights(w);
}

bool is_linear_model(const std::string& meta) {
  const auto j = nlohmann::json::parse(meta, nullptr, false);
  return j.is_object() && j.value("model", "") == "linear";
}

void predict_linear(const std::string& load, const std::string& data_path, const std::string& out) {
  std::vector<float> w;
  const auto meta = nlohmann::json::parse(load_weights_checkpoint(load, w), nullptr, false);
  const bool bias = meta.value("bias", false);
  const LinearLoss loss = parse_linear_loss(meta.value("loss", "logistic"));
  LibsvmOptions lo;
  lo.num_features = w.size() - (bias ? 1 : 0);
  lo.drop_beyond = true;
  LibsvmRead r = read_libsvm(data_path, lo);
  if (r.dropped > 0) fmt::print("'{}': dropped {} entries of features the model does not have\n", data_path, r.dropped);
  if (bias) append_constant_feature(r.rows);
  LinearModel m(w.size());
  m.set_weights(w);
  std::vector<float> scores = linear_margins(m, r.rows);
  if (loss == LinearLoss::Logistic)
    for (float& z : scores) z = sigmoid(z);
  write_scores(out, scores);
  fmt::print("model: linear, {} loss, {} features{}\n", linear_loss_name(loss), w.size(), bias ? " (last: the bias)" : "");
  LinearScore s;
  run_local(1, [&](Transport& t) { s = evaluate_linear(t, m, loss, r.rows); });
  fmt::print("{} samples of {}: loss {:.6f}, accuracy {:.3f} %, auc {:.6f}\n", s.rows, data_path, s.loss,
             100 * s.accuracy, s.auc);
  fmt::print("scores: {}\n", out);
}

void add_linear(CLI::App& app, Run& run) {
  auto a = std::make_shared<LinearArgs>();
  auto* c = app.add_subcommand("linear", "Train a linear classifier on sparse libsvm data (SparCML's MPI-OPT)");
  c->add_option("--data-path", a->data_path, "Training data: a libsvm/svmlight file, plain or gzip");
  c->add_option("--test-data-path", a->test_data_path, "Test data (libsvm), scored after every epoch");
  c->add_option("--num-features", a->num_features, "Feature count (0: the largest index in the training data)")
      ->capture_default_str();
  c->add_flag("--bias", a->bias, "Append a constant feature 1 to every row (as liblinear -B 1)");
  c->add_flag("--skip-bad-lines", a->skip_bad_lines, "Count and skip malformed lines instead of failing");
  c->add_option("--loss", a->loss, "logistic or hinge (linear SVM)")->capture_default_str();
  c->add_option("--algo", a->algo,
                "auto (newton for the logistic loss, sgd for the hinge), newton (truncated Newton, logistic loss), scd "
                "(block coordinate descent, logistic loss) or sgd (mini-batch SGD)")
      ->capture_default_str();
  c->add_option("--sgd-step", a->sgd_step, "sgd: adagrad (a step per feature; default) or plain (one step for all)");
  c->add_option("--mini-batch-size", a->batch,
                "sgd: rows per rank and step (default: at least 200 steps an epoch, at most 1000 rows)");
  c->add_option("--coords", a->coords,
                "scd: features per iteration, a block over every rank (default: features held / mean non-zeros a "
                "row, times 2: a row holds about two features of a block)");
  c->add_option("--learning-rate", a->lr,
                fmt::format("sgd: the step (default {:g} adagrad, {:g} plain)", kAdagradLr, kPlainLr));
  c->add_option("--lr-decay", a->lr_decay, "sgd: the step at e epochs done is lr / (1 + lr-decay * e) (default 0)");
  c->add_option("--l2", a->l2,
                "L2 penalty on the mean loss: mean loss + l2/2 |w|^2 (default 1/n, liblinear's -c 1; C = 1/(l2 n))");
  c->add_option("--epochs", a->epochs, "Passes over the data, at most")->capture_default_str();
  c->add_option("--tol", a->tol,
                "Stop after an epoch that changes the objective by less than this fraction of it (0: run every epoch)")
      ->capture_default_str();
  c->add_option("--num-batches", a->num_batches,
                "Steps (sgd) or iterations (scd) per epoch, for timing part of a pass (0: the whole pass)")
      ->capture_default_str();
  c->add_option("--exchange", a->exchange,
                "How the ranks sum gradients (sgd), a block's gradient and curvature (scd) or the gradient and "
                "Hessian products (newton): auto (newton: owner-alltoall), owner-alltoall (newton only), "
                "ssar-recursive-double, ssar-split-allgather, dsar-split-allgather, dense[:ring|rabenseifner|"
                "recursive-doubling|native]")
      ->capture_default_str();
  c->add_option("--threads", a->threads, "sgd: threads per rank (one rank: margins in parallel)")->capture_default_str();
  c->add_option("--ranks", a->ranks, "In-process ranks (0: 1, or the mpiexec world)")->capture_default_str();
  c->add_option("--net", a->net, "Virtual clock for in-process ranks: a network such as 10gbit,20us");
  c->add_option("--auto-net", a->auto_net, "The network `auto` plans for (default: --net, else 10gbit,20us)");
  c->add_option("--seed", a->seed, "Seed of the shuffles and coordinate orders")->capture_default_str();
  c->add_option("--timeout", a->timeout_s, "Seconds an exchange may wait for a peer")->capture_default_str();
  c->add_option("--metrics", a->metrics, "JSON lines: one event per epoch");
  c->add_option("--save", a->save, "Write the model here after every epoch (atomic)");
  c->add_option("--load", a->load, "Start from this model (sparq linear --save)");
  c->callback([a, &run] { run = [a] { run_linear(*a); }; });
}

}  // namespace sparq::cli
