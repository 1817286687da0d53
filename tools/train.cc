// `sparq train`: the DLRM reference's flags and output lines, on one rank or
// distributed (--ranks N threads, or one rank per mpiexec process): data
// parallel, model parallel / hybrid (--mp-splits) or parameter server
// (--dp-mode ps); docs/parallelism.md.
//
//   Finished training it i/n of epoch e, X ms/it, loss L, accuracy A %, S samples/s (data .. ms/it), eta T
//   Testing at - i/n of epoch e, loss L, accuracy A %, auc U, best auc B, ne N
//
// Data: --data-path DIR (train.{bin,tsv} and test.{bin,tsv}, as written by
// `sparq gen-data` / `sparq convert`) or FILE (+ --test-data-path), or
// --data-generation synthetic (teacher-labelled, generated in memory or read
// from / written to --data-cache DIR) or random (uniform, like the
// reference's --data-generation=random: for speed measurements only).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>

#include "sparq/coll/allreduce.h"
#include "sparq/coll/blob_allgather.h"
#include "sparq/coll/patterns.h"
#include "sparq/core/error.h"
#include "sparq/core/memory.h"
#include "sparq/core/units.h"
#include "sparq/model/blas.h"
#include "sparq/model/checkpoint.h"
#include "sparq/model/dlrm.h"
#include "sparq/model/optimizer.h"
#include "sparq/model/parallel.h"
#include "sparq/train/data_parallel.h"
#include "sparq/train/hybrid.h"
#include "sparq/train/param_server.h"
#include "sparq/train/verify.h"
#include "sparq/transport/group_transport.h"
#include "sparq/transport/launch.h"
#include "tools/commands.h"
#include "tools/train_args.h"
#include "tools/train_data.h"
#include "tools/train_report.h"

namespace sparq::cli {

namespace {

// On the 4-host emulated cluster (docs/results.md) -10 made the bf16 DCT-DP
// step ~5 % shorter and cost nothing measurable elsewhere.
constexpr int kDefaultCommNice = -10;

std::string checkpoint_meta(std::size_t step, const TrainArgs& a, const DlrmConfig& cfg, int state_ranks) {
  nlohmann::json j;
  j["step"] = step;
  j["seed"] = a.seed;
  j["model"] = cfg.describe();
  j["config"] = checkpoint_config_json(cfg);
  j["embedding_optimizer"] = a.emb_optim;
  j["optimizer"] = a.optimizer;
  j["state_ranks"] = state_ranks;  // ranks whose codec state the file holds
  if (!a.mp_splits.empty()) {  // predict runs the model as it trained: with the codec at its cuts
    j["mp_splits"] = a.mp_splits;
    j["mp_codec"] = a.mp_codec;
  }
  return j.dump();
}

// "42s", "3m05s", "2h07m": the ETA of the progress lines.
std::string format_duration(double s) {
  const auto t = static_cast<long long>(std::llround(std::max(s, 0.0)));
  if (t < 60) return fmt::format("{}s", t);
  if (t < 3600) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}h{:02}m", t / 3600, t % 3600 / 60);
}

// --save PATH: "{step}" in PATH becomes the step, so --save-every can keep
// every checkpoint; without it each save replaces the last.
std::string checkpoint_path(const std::string& pattern, std::size_t step) {
  std::string p = pattern;
  for (auto at = p.find("{step}"); at != std::string::npos; at = p.find("{step}", at))
    p.replace(at, 6, std::to_string(step));
  return p;
}

void train_rank(Transport& t, const TrainArgs& a, const DlrmConfig& cfg, const Data& data,
                const DataParallelOptions& dpo, const MpCodec& mpc);

// The alltoall codecs of table-wise embeddings: fp32 or row-wise q8/q4/q2.
Codec emb_codec(const std::string& s, const char* flag) {
  SPARQ_CHECK_AS(InputError, s == "fp32" || s == "q8" || s == "q4" || s == "q2", "{} must be fp32, q8, q4 or q2, got '{}'",
                 flag, s);
  return parse_codec(s);
}

// --lr-num-warmup-steps, --lr-decay-start-step, --lr-num-decay-steps, checked.
LrSchedule lr_schedule(const TrainArgs& a) {
  SPARQ_CHECK_AS(InputError, a.lr_num_warmup_steps >= 0 && a.lr_decay_start_step >= 0 && a.lr_num_decay_steps >= 0,
                 "--lr-num-warmup-steps, --lr-decay-start-step and --lr-num-decay-steps must be >= 0");
  const LrSchedule s{static_cast<std::uint64_t>(a.lr_num_warmup_steps),
                     static_cast<std::uint64_t>(a.lr_decay_start_step), static_cast<std::uint64_t>(a.lr_num_decay_steps)};
  s.validate();
  return s;
}

// Fails before anything is allocated when the model cannot fit this
// process: a lower bound (tables and activations, not the optimizer state,
// data or buffers), so a run it lets through may still be tight.
void check_train_memory(const TrainArgs& a, const DlrmConfig& cfg, int world, std::size_t nstages,
                        EmbPlacement placement) {
  const double ranks_here = a.ranks > 0 ? a.ranks : 1;  // in-process ranks, or one per mpiexec process
  double tables = 0;
  for (std::size_t r : cfg.table_rows) tables += static_cast<double>(r) * static_cast<double>(cfg.emb_dim) * 4;
  // Replicated: every replica in this process holds every table; table-wise:
  // the world's replicas share them, and with in-process replicas, replica 0
  // also holds a copy of them all (it gathers the model).
  tables *= placement == EmbPlacement::Replicated ? std::max(1.0, ranks_here / static_cast<double>(nstages))
                                                  : ranks_here / world + (a.ranks > static_cast<int>(nstages) ? 1 : 0);
  check_memory(tables, "the embedding tables");
  double widths = static_cast<double>(cfg.interaction_width() + cfg.num_tables() * cfg.emb_dim);
  for (std::size_t w : cfg.bot_mlp) widths += static_cast<double>(w);
  for (std::size_t w : cfg.top_mlp) widths += static_cast<double>(w);
  // Activations and their gradients of the whole batch, shared by the ranks.
  const double batch = static_cast<double>(a.batch) * widths * 4 * 2 * ranks_here / world;
  check_memory(tables + batch, fmt::format("the embedding tables and a mini-batch of {}", a.batch));
}

void run_train(const TrainArgs& a) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines appear as they happen, also when piped
  SPARQ_CHECK_AS(InputError, a.threads >= 1, "--threads must be >= 1");
  SPARQ_CHECK_AS(InputError, a.batch >= 1, "--mini-batch-size must be >= 1");
  SPARQ_CHECK_AS(InputError, a.save_every == 0 || !a.save.empty(), "--save-every needs --save PATH");
  SPARQ_CHECK_AS(InputError, a.test_freq >= -1, "--test-freq must be N > 0, 0 (each epoch's end) or -1 (never), got {}",
                 a.test_freq);
  SPARQ_CHECK_AS(InputError, a.test_freq >= 0 || (a.target_loss == 0 && a.target_auc == 0),
                 "--target-loss/--target-auc are checked at tests: --test-freq -1 never tests");
  SPARQ_CHECK_AS(InputError, std::isfinite(a.target_loss) && a.target_loss >= 0,
                 "--target-loss must be a test loss > 0 (or 0: none), got {}", a.target_loss);
  SPARQ_CHECK_AS(InputError, a.target_auc >= 0 && a.target_auc <= 1, "--target-auc must be in (0, 1] (or 0: none), got {}",
                 a.target_auc);
  set_blas_threads(a.threads);
  set_compute_threads(a.threads);
  DlrmConfig cfg;
  cfg.emb_dim = a.emb_dim;
  cfg.mlp_precision = parse_gemm_precision(a.mlp_precision);
  cfg.bot_mlp = parse_dash_list(a.mlp_bot);
  cfg.top_mlp = parse_dash_list(a.mlp_top);
  cfg.table_rows = per_table(a.emb_size, "--arch-embedding-size");
  // The reference's --max-ind-range bounds every table at M rows (it maps
  // value % M; sparq keeps its hash, value -> fmix32 % rows, hash.h).
  if (a.max_ind_range > 0)
    for (auto& r : cfg.table_rows) r = std::min(r, a.max_ind_range);
  SPARQ_CHECK_AS(InputError, cfg.num_dense() == kCriteoDense, "--arch-mlp-bot must start with {} (dense features)",
                 kCriteoDense);
  cfg.validate();
  parse_dense_optim(a.optimizer);
  lr_schedule(a);

  DataParallelOptions dpo;
  dpo.codec = parse_dp_codec(a.dp_codec, a.dp_allreduce);
  dpo.placement = parse_emb_placement(a.emb_placement);
  dpo.emb_fwd = emb_codec(a.emb_codec_fwd, "--emb-codec-fwd");
  dpo.emb_bwd = emb_codec(a.emb_codec_bwd, "--emb-codec-bwd");
  dpo.emb_row_len = a.emb_row_len;
  SPARQ_CHECK_AS(InputError,
                 dpo.placement == EmbPlacement::TableWise ||
                     (a.emb_codec_fwd == "fp32" && a.emb_codec_bwd == "fp32" && a.emb_row_len == 32),
                 "--emb-codec-fwd/--emb-codec-bwd/--emb-row-len quantize the table-wise alltoall: they need "
                 "--emb-placement table-wise");
  dpo.overlap = !a.no_overlap;
  dpo.fuse_bytes = parse_bytes(a.fuse_bytes);
  dpo.comm_nice = a.comm_nice.value_or(kDefaultCommNice);
  const MpCodec mpc = parse_mp_codec(a.mp_codec);
  const int world = a.ranks > 0 ? a.ranks : mpiexec_world_size();
  const std::size_t nstages = plan_stages(cfg, a.mp_splits).size();
  SPARQ_CHECK_AS(InputError, !a.comm_nice || world > 1,
                 "--comm-nice sets the communication thread's priority: one rank has none");
  SPARQ_CHECK_AS(InputError, a.dp_mode == "allreduce" || a.dp_mode == "ps", "--dp-mode must be allreduce or ps, got '{}'",
                 a.dp_mode);
  SPARQ_CHECK_AS(InputError, a.dp_mode == "ps" || (a.servers == 1 && a.max_staleness == 0),
                 "--servers and --max-staleness need --dp-mode ps");
  if (a.dp_mode == "ps") {
    SPARQ_CHECK_AS(InputError, a.dp_allreduce == "auto", "--dp-allreduce does not apply to --dp-mode ps (pushes)");
    SPARQ_CHECK_AS(InputError, a.servers >= 1 && world > a.servers,
                   "--dp-mode ps needs --servers >= 1 and at least one more rank for a worker ({} ranks, {} servers)",
                   world, a.servers);
    SPARQ_CHECK_AS(InputError, nstages == 1 && dpo.placement == EmbPlacement::Replicated && a.emb_optim == "sgd",
                   "--dp-mode ps serves the whole model to data-parallel workers: no --mp-splits, --emb-placement or "
                   "--embedding-optimizer other than sgd");
    SPARQ_CHECK_AS(InputError,
                   a.optimizer == "sgd" && a.lr_num_warmup_steps == 0 && a.lr_decay_start_step == 0 &&
                       a.lr_num_decay_steps == 0,
                   "--dp-mode ps: the servers apply plain SGD at a fixed rate: no --optimizer other than sgd, no "
                   "--lr-num-warmup-steps/--lr-decay-start-step/--lr-num-decay-steps");
    SPARQ_CHECK_AS(InputError, !a.comm_nice, "--comm-nice sets the data-parallel communication thread's priority; "
                   "--dp-mode ps has none");
    SPARQ_CHECK_AS(InputError, dpo.codec.kind == DpCodec::Kind::None || dpo.codec.kind == DpCodec::Kind::Dct,
                   "--dp-mode ps pushes dense gradients with --dp-codec none or dct:ETA,L, not '{}'", a.dp_codec);
  }
  if (nstages > 1) {
    SPARQ_CHECK_AS(InputError, static_cast<std::size_t>(world) % nstages == 0,
                   "--mp-splits '{}' makes {} stages: run on a multiple of {} ranks (replicas x stages), not {}",
                   a.mp_splits, nstages, nstages, world);
    SPARQ_CHECK_AS(InputError, dpo.placement == EmbPlacement::Replicated || static_cast<std::size_t>(world) > nstages,
                   "--emb-placement table-wise spreads the tables over the replicas: --mp-splits over {} ranks has "
                   "one replica",
                   world);
    SPARQ_CHECK_AS(InputError, !a.comm_nice,
                   "--comm-nice sets the data-parallel communication thread's priority; with --mp-splits the "
                   "replicas exchange on the training thread");
    SPARQ_CHECK_AS(InputError, dpo.overlap && dpo.fuse_bytes == 0,
                   "--no-overlap/--fuse-bytes shape the pure data-parallel exchange; with --mp-splits the replicas "
                   "exchange each stage's gradients after the pipeline's backward pass");
    SPARQ_CHECK_AS(InputError,
                   static_cast<std::size_t>(world) > nstages || (a.dp_codec == "none" && a.dp_allreduce == "auto"),
                   "--dp-codec and --dp-allreduce act between replicas: --mp-splits over {} ranks has one replica",
                   world);
  } else {
    SPARQ_CHECK_AS(InputError, a.mp_codec == "none" && a.micro_batches == 1 && a.mp_threshold_eta == 0.95,
                   "--mp-codec, --micro-batches and --mp-threshold-eta act between model-parallel stages: they need "
                   "--mp-splits");
  }
  SPARQ_CHECK_AS(InputError, a.net.empty() || (a.ranks > 0 && launch_mode() == "local"),
                 "--net emulates the network between in-process ranks: give --ranks P (under mpiexec the network is "
                 "real)");
  const std::optional<NetModel> net = a.net.empty() ? std::nullopt : std::optional(parse_net_model(a.net));
  SPARQ_CHECK_AS(InputError, std::isfinite(a.compute_scale) && a.compute_scale > 0,
                 "--compute-scale must be > 0, got {}", a.compute_scale);
  SPARQ_CHECK_AS(InputError, a.compute_scale == 1 || net, "--compute-scale scales the modelled computation: it needs --net");
  SPARQ_CHECK_AS(InputError, a.host_cores >= 0, "--host-cores must be >= 0 (0: a core per thread), got {}",
                 a.host_cores);
  SPARQ_CHECK_AS(InputError, a.host_cores == 0 || net, "--host-cores shapes the modelled computation: it needs --net");
  check_train_memory(a, cfg, world, nstages, dpo.placement);
  // In-process ranks are threads of this process: one core each. With --net
  // a rank's computation is its one thread's CPU time.
  if (a.ranks > 1 || net) {
    set_blas_threads(1);
    set_compute_threads(1);
  }
  // Every process loads the data once; in-process ranks share it (read only).
  const Data data = load_data(a, cfg);
  LaunchOptions lo;
  lo.ranks = a.ranks;
  lo.timeout = std::chrono::milliseconds(static_cast<long long>(a.timeout_s * 1000));
  lo.net = net;
  lo.cpu_scale = net ? a.compute_scale : 0;
  lo.host_cores = a.host_cores;
  launch(lo, [&](Transport& t) { train_rank(t, a, cfg, data, dpo, mpc); });
}

// The training loop of one rank (all of it when there is one rank).
void train_rank(Transport& t, const TrainArgs& a, const DlrmConfig& cfg, const Data& data,
                const DataParallelOptions& dpo, const MpCodec& mpc) {
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
  // Every event carries the seconds since training started (wall_s) and the
  // same less the time spent testing (train_s; a test event: when it began):
  // time to a target is train_s, so how often a run tests does not change it.
  Clock::time_point train_start = Clock::now();
  double eval_s = 0;
  // --net: the same on this rank's training thread's virtual clock (modeled_*).
  const bool modeled = t.virtual_time().has_value();
  auto vnow = [&] { return modeled ? *t.virtual_time() : 0.0; };
  double v_start = vnow(), v_eval = 0;
  auto emit = [&](nlohmann::json j) {
    if (!metrics) return;
    const double wall = seconds_since(train_start);
    j["wall_s"] = wall;
    if (!j.contains("train_s")) j["train_s"] = wall - eval_s;
    if (modeled) {
      const double v = vnow() - v_start;
      j["modeled_wall_s"] = v;
      if (!j.contains("modeled_train_s")) j["modeled_train_s"] = v - v_eval;
    }
    *metrics << j.dump() << "\n" << std::flush;
  };
  emit(config_event(a, nranks, t.name()));

  if (!data.source.empty()) say(fmt::format("data: {}\n", data.source));
  if (data.streaming())
    say(fmt::format("data: streaming {}{} ({} lines, shuffle buffer {}{})\n", data.stream_files.front(),
                    data.stream_files.size() > 1 ? fmt::format(" .. {}", data.stream_files.back()) : "",
                    data.stream_lines(), a.no_shuffle ? 0 : a.shuffle_buffer,
                    nranks > 1 ? ", each rank its own shard" : ""));
  say(fmt::format("data: {} train, {} test samples ({:.2f} s to load/generate){}\n", data.train.size(), data.test.size(),
             data.load_secs, a.skip_bad_lines ? fmt::format(", skipped {} bad lines", data.bad_lines) : ""));
  if (data.teacher)
    say(fmt::format("teacher (ceiling): test loss {:.6f}, accuracy {:.3f} %, auc {:.4f}\n", data.teacher->loss,
               100 * data.teacher->accuracy, data.teacher->auc));
  SPARQ_CHECK_AS(InputError, data.train.size() > 0 || data.stream_lines() > 0, "no training samples");
  SPARQ_CHECK_AS(InputError, (a.target_loss == 0 && a.target_auc == 0) || data.test.size() > 0,
                 "--target-loss/--target-auc are checked on the test set: this run has no test samples");

  const std::vector<DlrmStage> stages = plan_stages(cfg, a.mp_splits);
  const bool mp = stages.size() > 1;  // then this rank is stage t.rank()
  // Table-wise: a replica holds the tables it owns, and replica 0, which
  // gathers the model for tests and checkpoints, all of them (data parallel:
  // every rank is a replica; hybrid: rank = replica * stages + stage).
  std::vector<bool> hold;
  const int replica = t.rank() / static_cast<int>(stages.size());
  if (dpo.placement == EmbPlacement::TableWise && replica != 0) {
    const std::vector<int> owner = assign_tables(cfg.table_rows, nranks / static_cast<int>(stages.size()));
    for (int o : owner) hold.push_back(o == replica);
  }
  Dlrm<float> model(cfg, a.seed, mp ? stages[static_cast<std::size_t>(t.rank()) % stages.size()] : DlrmStage{}, hold);
  OptimizerOptions oo;
  oo.lr = a.lr;
  oo.embedding = parse_embedding_optim(a.emb_optim);
  oo.dense = parse_dense_optim(a.optimizer);
  oo.schedule = lr_schedule(a);
  Optimizer<float> opt(oo, model);
  std::size_t rows = 0;
  for (auto r : cfg.table_rows) rows += r;
  say(fmt::format("model: {} ({} dense parameters{}, {} embedding rows), lr {}{}, optimizer {}, embedding optimizer {}, "
                  "threads {}\n",
                  cfg.describe(), model.dense().size(), mp ? " on stage 0" : "", rows, a.lr,
                  oo.schedule.active() ? " (" + oo.schedule.describe() + ")" : "", a.optimizer, a.emb_optim,
                  compute_threads() == a.threads ? fmt::format("{}", a.threads)
                                                 : fmt::format("{} a rank (one core each)", compute_threads())));
  say(gemm_line(cfg.mlp_precision) + "\n");

  const bool streaming = data.streaming();
  BatchPlan plan(streaming ? data.stream_lines() : data.train.size(),
                 {.batch = a.batch, .shuffle = !a.no_shuffle, .seed = a.seed});
  const std::size_t nbatches = a.num_batches ? std::min(a.num_batches, plan.num_batches()) : plan.num_batches();
  std::unique_ptr<StreamBatches> streamer;
  std::size_t stream_bad = 0;
  std::size_t step = 0;
  std::vector<Blob> rank_states;  // --load: every rank's codec state
  if (!a.load.empty()) {
    const auto meta = nlohmann::json::parse(read_checkpoint_meta(a.load), nullptr, false);
    SPARQ_CHECK_AS(InputError, !meta.is_discarded() && meta.contains("step"), "'{}': checkpoint without a step", a.load);
    const std::string saved_optim = meta.value("optimizer", "sgd");  // older checkpoints: SGD was the only one
    SPARQ_CHECK_AS(InputError, saved_optim == a.optimizer,
                   "'{}' was saved with --optimizer {}: resume it with the same optimizer, not {}", a.load, saved_optim,
                   a.optimizer);
    if (mp) {  // the checkpoint holds the whole model: take this stage's part
      Dlrm<float> whole(cfg, a.seed);
      Optimizer<float> whole_opt(oo, whole);
      load_checkpoint(a.load, whole, &whole_opt, &rank_states);
      copy_stage(whole, whole_opt, model, opt);
    } else {
      load_checkpoint(a.load, model, &opt, &rank_states);
    }
    step = meta["step"];
    opt.set_steps(step);  // the schedule and Adam's bias correction continue where they were
    say(fmt::format("loaded {} at step {} (epoch {}, it {})\n", a.load, step, step / nbatches, step % nbatches));
  }

  if (mp)
    say(fmt::format("{}: {} replicas x {} stages (--mp-splits {}), {} micro-batches, --mp-codec {}, --dp-codec {}, "
                    "--emb-placement {}\n",
                    nranks > static_cast<int>(stages.size()) ? "hybrid parallel" : "model parallel",
                    static_cast<std::size_t>(nranks) / stages.size(), stages.size(), a.mp_splits, a.micro_batches,
                    mpc.text, dpo.codec.text, emb_placement_name(dpo.placement)));
  else if (nranks > 1 && a.dp_mode != "ps")
    say(fmt::format("data parallel: {} ranks, --dp-codec {}, --emb-placement {}, overlap {}, fuse {} bytes\n", nranks,
                    dpo.codec.text, emb_placement_name(dpo.placement), dpo.overlap ? "on" : "off", dpo.fuse_bytes));
  Batch batch;
  compress::ErrorFeedbackStore residuals({a.ef_drain_every, a.ef_drain_fraction, a.seed});
  std::optional<DataParallel> dp;
  std::optional<Hybrid> hybrid;  // model parallelism, with replicas when there are more ranks than stages
  std::optional<PsLayout> layout;
  std::optional<PsWorker> ps;
  std::optional<GroupTransport> workers_group;  // parameter server: the workers, for their loss sums
  if (a.dp_mode == "ps") {
    const int workers = nranks - a.servers;
    layout.emplace(model, workers, a.servers);
    if (t.rank() >= workers) {  // a server: serve until every worker has finished
      PsServer(t, model, *layout, a.lr, a.max_staleness, step).run();
      return;
    }
    say(fmt::format("parameter server: {} workers, {} servers, --max-staleness {}, --dp-codec {}\n", workers,
                    a.servers, a.max_staleness, dpo.codec.text));
    std::vector<int> members(static_cast<std::size_t>(workers));
    std::iota(members.begin(), members.end(), 0);
    workers_group.emplace(t, members);
    ps.emplace(t, model, *layout, dpo.codec, residuals);
  } else if (mp) {
    hybrid.emplace(t, stages.size(), model, opt, a.micro_batches, mpc, dpo, residuals);
    hybrid->pipeline().track_threshold(a.mp_threshold_eta);
  } else {
    dp.emplace(t, model, opt, dpo, residuals);
    if (nranks > 1 && dpo.comm_nice != 0) {
      if (const std::string why = dp->comm_priority_note(); !why.empty())
        std::fprintf(stderr, "rank %d: the communication thread runs at the default priority: %s\n", t.rank(),
                     why.c_str());
      else
        say(fmt::format("communication thread: nice {}\n", dpo.comm_nice));
    }
  }
  Transport& peers = workers_group ? static_cast<Transport&>(*workers_group) : t;  // the ranks that train
  // Codec state: each training rank's own (residuals, thresholds, plans).
  auto save_state = [&] { return dp ? dp->save_state() : hybrid ? hybrid->save_state() : ps->save_state(); };
  if (!rank_states.empty()) {
    // Residuals belong to a rank's share of the data: another number of
    // ranks cannot continue them, so the run says it starts them afresh.
    if (rank_states.size() == static_cast<std::size_t>(peers.size())) {
      const auto& mine = rank_states[static_cast<std::size_t>(peers.rank())];
      if (dp) dp->load_state(mine);
      if (hybrid) hybrid->load_state(mine);
      if (ps) ps->load_state(mine);
    } else if (dpo.codec.kind != DpCodec::Kind::None || mpc.kind != MpCodec::Kind::None) {
      say(fmt::format("note: '{}' holds the codec state of {} ranks, this run has {}: error feedback and thresholds "
                      "restart from zero\n",
                      a.load, rank_states.size(), peers.size()));
    }
  }
  // A checkpoint of the whole model, every rank's codec state and the step
  // (every rank calls it; rank 0 writes).
  auto save_now = [&] {
    const std::string path = checkpoint_path(a.save, step);
    std::unique_ptr<Dlrm<float>> whole;
    std::unique_ptr<Optimizer<float>> whole_opt;
    if (dp) dp->gather_model(0);
    if (ps && lead) ps->fetch_all(step);  // the servers' shards make the complete model
    if (mp) {  // rank 0 assembles the whole model from replica 0's stages
      if (lead) whole = std::make_unique<Dlrm<float>>(cfg, a.seed), whole_opt = std::make_unique<Optimizer<float>>(oo, *whole);
      hybrid->gather_tables();
      gather_whole(t, stages, model, opt, whole.get(), whole_opt.get());
    }
    const std::vector<Blob> states = gather_blobs(peers, save_state(), 0);
    if (!lead) return;
    save_checkpoint(path, whole ? *whole : model, whole_opt ? *whole_opt : opt,
                    checkpoint_meta(step, a, cfg, peers.size()), states);
    say(fmt::format("saved {} at step {}\n", path, step));
  };
  // --fail-at RANK:STEP (testing failure handling): that rank dies there.
  long fail_rank = -1;
  std::uint64_t fail_step = 0;
  if (!a.fail_at.empty()) {
    const auto colon = a.fail_at.find(':');
    SPARQ_CHECK_AS(InputError, colon != std::string::npos, "--fail-at expects RANK:STEP, got '{}'", a.fail_at);
    fail_rank = std::stol(a.fail_at.substr(0, colon));
    fail_step = std::stoull(a.fail_at.substr(colon + 1));
  }
  // One step of the plan: this rank's loss sum and samples, phase times,
  // traffic by entity, and time blocked on communication.
  struct StepOut {
    double loss_sum = 0;
    std::size_t samples = 0;
    double fwd = 0, bwd = 0, opt = 0, wait = 0;
    Accounting traffic;
    double threshold_sum = 0;
    std::size_t threshold_rows = 0;
    std::size_t correct = 0;  // predictions that equal the label (training accuracy)
  };
  double busy_total = 0, idle_total = 0;  // model parallelism: this stage
  double thr_sum = 0;                     // model parallelism: X_act thresholds since the last print
  std::size_t thr_rows = 0;
  auto run_step = [&](const Batch& b) {
    StepOut o;
    if (ps) {
      const PsWorkerStats s = ps->step(b, step);
      o = {s.loss * static_cast<double>(s.samples), s.samples, s.forward_s, s.backward_s, 0, s.wait_s, {}, 0, 0,
           s.correct};
      o.traffic.add("W_grad", s.w_grad);
      o.traffic.add("emb_grad", s.emb_grad);
      ExchangeStats pull = s.pull;  // received; no compressed form to compare with
      pull.dense_bytes = pull.bytes_sent;
      o.traffic.add("pull", pull);
      return o;
    }
    if (hybrid) {
      const HybridStepStats h = hybrid->step(b, step);
      const PipelineStepStats& s = h.pipe;
      o = {h.loss_sum, h.samples, s.forward_s, s.backward_s, s.optimizer_s, s.idle_s, {}, s.threshold_sum,
           s.threshold_rows, s.correct};
      o.traffic.add("X_act", s.x_act);
      o.traffic.add("X_grad", s.x_grad);
      if (hybrid->replicas() > 1) {
        o.traffic.add("W_grad", h.w_grad);
        if (dpo.placement == EmbPlacement::TableWise) {
          o.traffic.add("emb_fwd", h.emb_fwd);
          o.traffic.add("emb_bwd", h.emb_bwd);
        } else {
          o.traffic.add("emb_grad", h.emb_grad);
        }
        o.wait += h.w_grad.wait_seconds + h.emb_grad.wait_seconds + h.emb_fwd.wait_seconds + h.emb_bwd.wait_seconds;
      }
      busy_total += s.forward_s + s.backward_s + s.optimizer_s;
      idle_total += o.wait;
      return o;
    }
    const DpStepStats s = dp->step(b, step);
    const std::size_t local = pattern::Partition{b.size, nranks}.len(t.rank());
    o = {s.loss * static_cast<double>(local), local, s.forward_s, s.backward_s, s.optimizer_s, 0, {}, 0, 0, s.correct};
    if (nranks > 1) {
      o.traffic.add("W_grad", s.w_grad);
      if (dpo.placement == EmbPlacement::TableWise) {
        o.traffic.add("emb_fwd", s.emb_fwd);
        o.traffic.add("emb_bwd", s.emb_bwd);
      } else {
        o.traffic.add("emb_grad", s.emb_grad);
      }
    }
    o.wait = o.traffic.wait_seconds();
    return o;
  };
  Accounting acct, acct_print;  // this rank's traffic: cumulative, since the last print
  double t_comm = 0, tot_comm = 0;
  double t_data = 0, t_fwd = 0, t_bwd = 0, t_opt = 0, t_iter = 0, v_iter = 0, loss_sum = 0, correct = 0;  // since the last print
  double tot_data = 0, tot_fwd = 0, tot_bwd = 0, tot_opt = 0, tot_iter = 0, tot_v_iter = 0;
  std::size_t tot_its = 0;
  std::size_t its = 0, samples = 0, tot_samples = 0, local_samples = 0;
  // Replicas must stay bit-identical: hash every parameter, compare across ranks.
  auto verify_model = [&](std::size_t at) {
    if (dp) verify_replica_hash(t, dp->replica_hash(), at);
    if (hybrid) hybrid->verify(at);  // among each stage's replicas
  };
  double best_auc = 0;
  EvalResult last_eval;
  bool evaluated = false;
  // --target-loss / --target-auc: the first test that reaches it ends training.
  const bool has_target = a.target_loss > 0 || a.target_auc > 0;
  bool reached = false;
  auto reaches = [&](const EvalResult& r) {
    return (a.target_loss > 0 && r.loss <= a.target_loss) || (a.target_auc > 0 && r.auc >= a.target_auc);
  };
  train_start = Clock::now();
  v_start = vnow();
  double test_at = 0, v_test_at = 0;  // train_s and modeled_train_s when the current test began
  auto test_and_report = [&](std::size_t it, std::size_t epoch) {
    std::optional<EvalResult> r;
    if (ps) {
      if (!lead) return;
      ps->fetch_all(step);  // the servers' model once every worker has pushed as many steps
      r = evaluate(
          [&](const Batch& b) {
            const auto z = model.forward(b);
            return std::vector<float>(z.begin(), z.end());
          },
          data.test, cfg, a.test_batch);
    } else if (hybrid) {  // replica 0's stages run the test batches; its last scores them and tells rank 0
      hybrid->gather_tables();
      r = evaluate([&](const Batch& b) { return hybrid->predict(b); }, data.test, cfg, a.test_batch);
      double m[4] = {r ? r->loss : 0, r ? r->accuracy : 0, r ? r->auc : 0, r ? r->positive_rate : 0};
      allreduce(t, std::span<double>(m));
      r = EvalResult{m[0], m[1], m[2], m[3]};
    } else {
      dp->gather_model(0);  // table-wise: the tables of the other ranks
      if (!lead) return;    // the dense replicas are identical: one rank tests
      r = evaluate(
          [&](const Batch& b) {
            const auto z = model.forward(b);
            return std::vector<float>(z.begin(), z.end());
          },
          data.test, cfg, a.test_batch);
    }
    if (!lead || !r) return;
    last_eval = *r;
    evaluated = true;
    best_auc = std::max(best_auc, last_eval.auc);
    say(fmt::format("Testing at - {}/{} of epoch {}, loss {:.6f}, accuracy {:.3f} %, auc {:.4f}, best auc {:.4f}, ne "
                    "{:.6f}\n",
                    it, nbatches, epoch, last_eval.loss, 100 * last_eval.accuracy, last_eval.auc, best_auc,
                    last_eval.ne()));
    emit({{"event", "test"}, {"epoch", epoch}, {"it", it}, {"nbatches", nbatches}, {"step", epoch * nbatches + it},
          {"loss", last_eval.loss}, {"accuracy", last_eval.accuracy}, {"auc", last_eval.auc},
          {"positive_rate", last_eval.positive_rate}, {"ne", last_eval.ne()}, {"train_s", test_at},
          {"modeled_train_s", v_test_at}});
  };
  auto test_now = [&](std::size_t it, std::size_t epoch) {
    if (data.test.size() == 0) return;
    const auto e0 = Clock::now();
    const double v0 = vnow();
    test_at = seconds_since(train_start) - eval_s;
    v_test_at = v0 - v_start - v_eval;
    test_and_report(it, epoch);
    if (has_target && !reached) {  // every training rank learns what the lead saw
      double hit = lead && evaluated && reaches(last_eval) ? 1 : 0;
      if (peers.size() > 1) allreduce(peers, std::span<double>(&hit, 1), {.op = ReduceOp::Max});
      reached = hit > 0;
    }
    eval_s += seconds_since(e0);
    v_eval += vnow() - v0;
    if (!reached) return;
    const double wall = seconds_since(train_start);
    say(fmt::format("target reached: test {} at step {} (epoch {}, it {}/{}): {:.3f} s of training ({:.3f} s with "
                    "tests){}\n",
                    a.target_loss > 0 && last_eval.loss <= a.target_loss
                        ? fmt::format("loss {:.6f} <= {}", last_eval.loss, a.target_loss)
                        : fmt::format("auc {:.4f} >= {}", last_eval.auc, a.target_auc),
                    step, epoch, it, nbatches, test_at, wall,
                    modeled ? fmt::format("; modeled on {}: {:.3f} s of training", a.net, v_test_at) : ""));
    emit({{"event", "target"}, {"step", step}, {"loss", last_eval.loss}, {"auc", last_eval.auc},
          {"target_loss", a.target_loss}, {"target_auc", a.target_auc}, {"train_s", test_at},
          {"modeled_train_s", v_test_at}});
  };

  for (std::size_t epoch = step / nbatches; epoch < a.nepochs; ++epoch) {
    if (streaming) {
      if (streamer) stream_bad += streamer->bad_lines();
      streamer = std::make_unique<StreamBatches>(data, a, epoch, peers);
      for (std::size_t k = 0; k < step % nbatches; ++k)  // resume: skip what this epoch already trained on
        streamer->next(a.batch, cfg.table_rows, batch);
    } else {
      plan.start_epoch(epoch);
    }
    for (std::size_t it = step % nbatches; it < nbatches; ++it) {
      if (t.rank() == fail_rank && step == fail_step) {
        std::fprintf(stderr, "sparq: --fail-at: rank %d stops at step %zu\n", t.rank(), step);
        if (t.name() == "mpi") std::raise(SIGKILL);  // as if killed
        return;  // in-process: falls silent, the others must notice
      }
      auto t0 = Clock::now();
      const double v0 = vnow();
      if (streaming) {
        const std::uint64_t sent = streamer->bytes_sent();
        if (!streamer->next(a.batch, cfg.table_rows, batch)) break;  // fewer records than lines (bad lines, sub-sampling)
        if (nranks > 1) {
          ExchangeStats x;  // the records of the global batch, allgathered
          x.bytes_sent = x.dense_bytes = streamer->bytes_sent() - sent;
          acct_print.add("data", x);
        }
      } else {
        // Every rank takes the global batch's records; data parallel, it
        // assembles only what its step reads (its share, its tables' ids).
        if (dp) {
          const BatchPart part = dp->batch_part(plan.batch_size(it));
          plan.fill(it, data.train.records(), cfg.table_rows, batch, &part);
        } else {
          plan.fill(it, data.train.records(), cfg.table_rows, batch);
        }
      }
      const std::size_t global_size = batch.size;
      t_data += seconds_since(t0);
      const StepOut s = run_step(batch);
      loss_sum += s.loss_sum;
      correct += static_cast<double>(s.correct);
      t_fwd += s.fwd;
      t_bwd += s.bwd;
      t_opt += s.opt;
      t_comm += s.wait;
      acct_print.add(s.traffic);
      thr_sum += s.threshold_sum;
      thr_rows += s.threshold_rows;
      t_iter += seconds_since(t0);
      v_iter += vnow() - v0;
      ++its;
      samples += global_size;
      local_samples += s.samples;
      residuals.maybe_drain(step);
      ++step;
      if (a.save_every > 0 && step % a.save_every == 0) save_now();
      if (nranks > 1 && a.verify_freq > 0 && step % a.verify_freq == 0) verify_model(step);
      if ((it + 1) % a.print_freq == 0 || it + 1 == nbatches) {
        // Wall time of the iterations themselves: printing and testing stay out of ms/it.
        const double wall = t_iter;
        const double ms = 1e3 * wall / static_cast<double>(its);
        // The global batch's mean loss and accuracy: every rank's sums over its samples.
        double sums[3] = {loss_sum, static_cast<double>(local_samples), correct};
        if (peers.size() > 1) allreduce(peers, std::span<double>(sums));
        const double loss = sums[0] / sums[1], train_accuracy = sums[2] / sums[1];
        const double n = static_cast<double>(its);
        // At this interval's pace, the steps left of --nepochs (a target may end sooner).
        const double eta = ms / 1e3 * static_cast<double>(a.nepochs * nbatches - step);
        say(fmt::format(
            "Finished training it {}/{} of epoch {}, {:.2f} ms/it, loss {:.6f}, accuracy {:.3f} %, {:.0f} samples/s "
            "(data {:.2f} fwd {:.2f} bwd {:.2f} opt {:.2f}{} ms/it), eta {}{}\n",
            it + 1, nbatches, epoch, ms, loss, 100 * train_accuracy, static_cast<double>(samples) / wall,
            1e3 * t_data / n, 1e3 * t_fwd / n, 1e3 * t_bwd / n, 1e3 * t_opt / n,
            nranks > 1 ? fmt::format(" comm wait {:.2f}", 1e3 * t_comm / n) : "", format_duration(eta),
            modeled ? fmt::format(", modeled {:.2f} ms/it", 1e3 * v_iter / n) : ""));
        nlohmann::json traffic;  // bytes per step since the last print, per entity
        for (const auto& [name, x] : acct_print.rows)
          traffic[name] = {{"bytes_per_step", static_cast<double>(x.bytes_sent) / n},
                           {"dense_bytes_per_step", static_cast<double>(x.dense_bytes) / n}, {"ratio", ratio(x)}};
        nlohmann::json ev = {{"event", "train"}, {"epoch", epoch}, {"it", it + 1}, {"nbatches", nbatches}, {"step", step},
              {"loss", loss}, {"accuracy", train_accuracy}, {"eta_s", eta}, {"ms_per_it", ms}, {"samples_per_s", static_cast<double>(samples) / wall},
              {"phase_ms", {{"data", 1e3 * t_data / n}, {"forward", 1e3 * t_fwd / n},
                            {"backward", 1e3 * t_bwd / n}, {"optimizer", 1e3 * t_opt / n},
                            {"comm_wait", 1e3 * t_comm / n}}},
              {"traffic", traffic}};
        if (modeled) ev["modeled_ms_per_it"] = 1e3 * v_iter / n;
        emit(std::move(ev));
        if (thr_rows > 0)  // rank 0 is stage 0 of replica 0: the first cut
          emit({{"event", "threshold"}, {"step", step}, {"eta", a.mp_threshold_eta},
                {"mean", thr_sum / static_cast<double>(thr_rows)}});
        thr_sum = 0;
        thr_rows = 0;
        acct.add(acct_print);
        acct_print = {};
        tot_data += t_data, tot_fwd += t_fwd, tot_bwd += t_bwd, tot_opt += t_opt, tot_comm += t_comm;
        tot_samples += samples;
        tot_v_iter += v_iter, tot_iter += t_iter, tot_its += its;
        t_data = t_fwd = t_bwd = t_opt = t_comm = t_iter = v_iter = loss_sum = correct = 0;
        its = samples = local_samples = 0;
      }
      if (a.test_freq > 0 && (it + 1) % static_cast<std::size_t>(a.test_freq) == 0 && it + 1 != nbatches) {
        test_now(it + 1, epoch);
        if (reached) break;
      }
    }
    if (reached) break;
    if (a.test_freq >= 0) test_now(nbatches, epoch);
    if (reached) break;
  }
  if (has_target && !reached)
    say(fmt::format("target not reached: {} after {} steps (last test: loss {:.6f}, auc {:.4f})\n",
                    a.target_loss > 0 ? fmt::format("test loss <= {}", a.target_loss)
                                      : fmt::format("test auc >= {}", a.target_auc),
                    step, last_eval.loss, last_eval.auc));
  const double train_wall = seconds_since(train_start);
  if (tot_samples > 0) {
    const double compute = tot_fwd + tot_bwd + tot_opt + tot_comm;
    const double flops = 6.0 * static_cast<double>(model.mlp_macs_per_sample()) * static_cast<double>(tot_samples);
    say(fmt::format(
        "summary: {} samples, compute (fwd+loss+bwd+update) {:.0f} samples/s, with data assembly {:.0f} samples/s "
        "(data path {:.1f} % of step time){}\n",
        tot_samples, static_cast<double>(tot_samples) / compute,
        static_cast<double>(tot_samples) / (compute + tot_data), 100 * tot_data / (compute + tot_data),
        mp ? "" : fmt::format(", MLP {:.1f} GFLOP/s over fwd+bwd", flops / (tot_fwd + tot_bwd) / 1e9)));
    if (modeled)
      say(fmt::format("modeled on {}: {:.2f} ms/it, {:.3f} s of training ({:.3f} s with tests; real: {:.2f} ms/it)\n",
                      a.net, 1e3 * tot_v_iter / static_cast<double>(tot_its), vnow() - v_start - v_eval,
                      vnow() - v_start, 1e3 * tot_iter / static_cast<double>(tot_its)));
    nlohmann::json ev = {{"event", "summary"}, {"samples", tot_samples}, {"train_wall_s", train_wall}, {"steps", step},
                         {"target_reached", has_target ? nlohmann::json(reached) : nlohmann::json()},
                         {"compute_samples_per_s", static_cast<double>(tot_samples) / compute},
                         {"samples_per_s_with_data", static_cast<double>(tot_samples) / (compute + tot_data)},
                         {"ms_per_it", 1e3 * tot_iter / static_cast<double>(tot_its)},
                         {"load_s", data.load_secs}, {"bad_lines", data.bad_lines}};
    if (modeled) ev["modeled_ms_per_it"] = 1e3 * tot_v_iter / static_cast<double>(tot_its);
    emit(std::move(ev));
  }
  if (data.teacher && evaluated)
    say(fmt::format("teacher gap: teacher auc {:.4f}, model auc {:.4f}, gap {:.4f}\n", data.teacher->auc, last_eval.auc,
               data.teacher->auc - last_eval.auc));
  if (streamer) stream_bad += streamer->bad_lines();
  if (a.skip_bad_lines) say(fmt::format("skipped {} bad lines\n", data.bad_lines + stream_bad));
  if (mp) {
    verify_model(step);
    // Per rank: time computing and time waiting (for a neighbour, or the replicas' exchange).
    std::vector<double> bi(2 * static_cast<std::size_t>(nranks), 0.0);
    bi[2 * t.rank()] = busy_total, bi[2 * t.rank() + 1] = idle_total;
    allreduce(t, std::span<double>(bi));
    const int m = static_cast<int>(stages.size());
    for (int s = 0; s < nranks; ++s) {
      say(fmt::format("rank {} (replica {}, stage {}): busy {:.3f} s, idle {:.3f} s ({:.1f} % idle)\n", s, s / m,
                      s % m, bi[2 * s], bi[2 * s + 1], 100 * bi[2 * s + 1] / std::max(1e-12, bi[2 * s] + bi[2 * s + 1])));
      emit({{"event", "stage"}, {"rank", s}, {"replica", s / m}, {"stage", s % m}, {"busy_s", bi[2 * s]},
            {"idle_s", bi[2 * s + 1]}});
    }
    report_accounting(sum_over_ranks(t, acct), step,
                      fmt::format("all ranks; --mp-splits {}, --mp-codec {}, --dp-codec {}, --emb-placement {}",
                                  a.mp_splits, mpc.text, dpo.codec.text, emb_placement_name(dpo.placement)),
                      say, emit);
  } else if (ps) {
    report_accounting(acct, step,
                      fmt::format("worker 0; --dp-mode ps, --servers {}, --max-staleness {}, --dp-codec {}", a.servers,
                                  a.max_staleness, dpo.codec.text),
                      say, emit, true);
  } else if (nranks > 1) {
    verify_model(step);
    report_accounting(acct, step,
                      fmt::format("rank 0; --dp-codec {}, --emb-placement {}{}", dpo.codec.text,
                                  emb_placement_name(dpo.placement),
                                  dpo.placement == EmbPlacement::TableWise
                                      ? fmt::format(", --emb-codec-fwd {} --emb-codec-bwd {}", a.emb_codec_fwd,
                                                    a.emb_codec_bwd)
                                      : ""),
                      say, emit);
  }
  report_memory(peers, std::max(1, a.ranks), say, emit);
  if (!a.save.empty() && (a.save_every == 0 || step % a.save_every != 0)) save_now();
  if (ps) ps->finish();
}

}  // namespace

void add_train(CLI::App& app, Run& run) {
  auto a = std::make_shared<TrainArgs>();
  auto* c = app.add_subcommand("train", "Train DLRM with the reference's flags, on one rank or distributed");
  c->footer(R"(Plans (docs/parallelism.md):
  one rank           no --ranks and no mpiexec; --threads splits each step's work
  data parallel      --ranks N (threads of this process) or one rank per mpiexec process;
                     --mini-batch-size is the global batch. Dense gradients: --dp-codec,
                     --dp-allreduce, --fuse-bytes, --no-overlap. Tables: --emb-placement
                     replicated (sparse allreduce of their gradients) or table-wise (tables
                     spread over the ranks, alltoalls coded by --emb-codec-fwd/--emb-codec-bwd)
  model parallel     --mp-splits cuts the MLPs into stages, one rank each, pipelined over
                     --micro-batches; --mp-codec codes what crosses a cut (DCT-MP)
  hybrid             --mp-splits on a multiple of the stage count: replicas of the pipeline,
                     each stage's gradients exchanged among its replicas with --dp-codec
  parameter server   --dp-mode ps: the last --servers ranks hold the model, the others push
                     gradients and pull parameters asynchronously (--max-staleness)
Data: --data-path (TSV, sparq binary, the reference's .npz), --raw-data-file with --data-set
kaggle|terabyte (the reference's split; day files may be .gz), or --data-generation
synthetic|random. --stream reads TSV as it trains, each rank its own shard.
Checkpoints (--save, --save-every, --load) hold the model, the optimizer and every rank's
codec state: a resumed run continues bit for bit.)");
  c->add_option("--arch-sparse-feature-size", a->emb_dim, "Embedding dimension")->capture_default_str();
  c->add_option("--arch-mlp-bot", a->mlp_bot, "Bottom MLP widths, input first")->capture_default_str();
  c->add_option("--arch-mlp-top", a->mlp_top, "Top MLP widths after the interaction, ending in 1")->capture_default_str();
  c->add_option("--arch-embedding-size", a->emb_size, "Rows per table: 26 dash-separated or one for all")
      ->capture_default_str();
  c->add_option("--mini-batch-size", a->batch, "Training batch size")->capture_default_str();
  c->add_option("--test-mini-batch-size", a->test_batch, "Evaluation batch size")->capture_default_str();
  c->add_option("--learning-rate", a->lr, "Learning rate (dense and embeddings)")->capture_default_str();
  c->add_option("--optimizer", a->optimizer,
                "Dense (MLP) optimizer: sgd, adagrad or adam (PyTorch's formulas and defaults)")
      ->capture_default_str();
  c->add_option("--embedding-optimizer", a->emb_optim, "sgd or rowwise-adagrad")->capture_default_str();
  c->add_option("--lr-num-warmup-steps", a->lr_num_warmup_steps,
                "LR schedule (the reference's): linear warmup over this many steps (0: none)")
      ->capture_default_str();
  c->add_option("--lr-decay-start-step", a->lr_decay_start_step,
                "LR schedule: the step the quadratic decay starts at (>= the warmup steps)")
      ->capture_default_str();
  c->add_option("--lr-num-decay-steps", a->lr_num_decay_steps,
                "LR schedule: decay over this many steps to at least 1e-7, then hold (0: no decay)")
      ->capture_default_str();
  c->add_option("--nepochs", a->nepochs, "Epochs")->capture_default_str();
  c->add_option("--num-batches", a->num_batches, "Batches per epoch (0 = the whole training set)")->capture_default_str();
  c->add_option("--print-freq", a->print_freq, "Print every N iterations")->capture_default_str()->check(kPositive);
  c->add_option("--test-freq", a->test_freq,
                "Test every N iterations and at the end of each epoch (0: only at the end of each epoch; -1: never, as "
                "the reference's default)")
      ->capture_default_str();
  c->add_option("--data-path", a->data_path, "Directory with train/test .bin/.tsv, or a training file");
  c->add_option("--test-data-path", a->test_data_path, "Test file (when --data-path is a file)");
  c->add_option("--data-generation", a->data_generation, "dataset, synthetic or random")->capture_default_str();
  c->add_option("--data-set", a->data_set, "--raw-data-file's layout: kaggle (one file, 7 days) or terabyte (day files)")
      ->capture_default_str();
  c->add_option("--raw-data-file", a->raw_data_file,
                "Raw Criteo data with the reference's split: kaggle: train.txt; terabyte: the prefix of PREFIX_0 .. "
                "PREFIX_23 (each plain or .gz). The last day: first half test, second half validation");
  c->add_option("--max-ind-range", a->max_ind_range,
                "At most this many rows per table (the reference's flag; sparq hashes values to rows, hash.h; 0: no "
                "cap)")
      ->capture_default_str();
  c->add_option("--data-days", a->data_days, "Days of --raw-data-file (0: 7 for kaggle, 24 for terabyte)")
      ->capture_default_str();
  c->add_option("--data-sub-sample-rate", a->sub_sample_rate,
                "Drop this fraction of the negative training samples of --raw-data-file (as the reference)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.999999));
  c->add_option("--data-size", a->data_size, "Synthetic training samples")->capture_default_str();
  c->add_option("--num-test", a->num_test, "Synthetic test samples")->capture_default_str();
  c->add_option("--data-cache", a->data_cache, "Synthetic: directory to reuse or write the generated data (binary)");
  c->add_option("--zipf", a->zipf, "Synthetic: Zipf exponent")->capture_default_str();
  c->add_option("--cardinalities", a->cardinalities, "Synthetic: distinct values per table");
  c->add_option("--seed", a->seed, "Seed of model init, data order and synthetic data")->capture_default_str();
  c->add_option("--threads", a->threads,
                 "Threads of the step: each large GEMM is split over them, and the interaction, embedding and "
                 "SGD loops")
      ->capture_default_str();
  c->add_option("--mlp-precision", a->mlp_precision,
                "Operands of the MLPs' GEMMs: fp32, or bf16 (rounded to bfloat16, accumulated in fp32; weights, "
                "gradients and optimizer stay fp32; needs a CPU with AVX512_BF16)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  c->add_flag("--skip-bad-lines", a->skip_bad_lines, "Skip and count malformed TSV lines");
  c->add_flag("--no-shuffle", a->no_shuffle, "Keep the training set's order");
  c->add_flag("--stream", a->stream,
              "Stream a TSV training file each epoch (background parser + shuffle buffer) instead of loading it");
  c->add_option("--shuffle-buffer", a->shuffle_buffer, "--stream: shuffle buffer in records")->capture_default_str();
  c->add_option("--metrics", a->metrics, "Write JSON lines (one per print/test event) to this file");
  c->add_option("--save", a->save,
                "Save a checkpoint here at the end (and every --save-every steps; \"{step}\" in the path becomes the "
                "step)");
  c->add_option("--save-every", a->save_every, "Save a checkpoint every N steps (0: only at the end)")
      ->capture_default_str();
  c->add_option("--load", a->load, "Resume from this checkpoint");
  c->add_option("--ranks", a->ranks,
                "Data parallel over N in-process ranks (threads); under mpiexec every process is a rank. "
                "--mini-batch-size is the global batch")
      ->check(kPositive);
  c->add_option("--dp-codec", a->dp_codec,
                "Dense gradient exchange: none, dct:ETA,L (DCT-DP), topk:K/B, q8|q4|q2[+ec|+ec-skip-first], qsgd:BITS "
                "(+ec: error compensation on every hop; +ec-skip-first: not on a ring chunk's first hop, as in "
                "Yang et al.'s Algorithm 2)")
      ->capture_default_str();
  c->add_option("--dp-allreduce", a->dp_allreduce,
                "Collective of the --dp-codec: auto, or for none ring|recursive-doubling|rabenseifner|native, for q* "
                "ring|recursive-doubling, for dct/topk ssar-recursive-double|ssar-split-allgather|"
                "dsar-split-allgather|dense")
      ->capture_default_str();
  c->add_option("--fuse-bytes", a->fuse_bytes,
                "Exchange adjacent layers' gradients together until a group holds this many bytes (e.g. 1MiB; 0: "
                "every tensor alone)")
      ->capture_default_str();
  c->add_flag("--no-overlap", a->no_overlap,
              "Exchange the dense gradients after the backward pass instead of layer by layer during it");
  c->add_option("--comm-nice", a->comm_nice,
                fmt::format("Data parallel: the communication thread's nice value, -20 to 0 (default {}): below 0 it "
                            "runs ahead of the compute threads where ranks share cores; 0 leaves it. Needs "
                            "CAP_SYS_NICE or RLIMIT_NICE; where not permitted the run says so and goes on",
                            kDefaultCommNice))
      ->check(CLI::Range(-20, 0));
  c->add_option("--emb-placement", a->emb_placement,
                "replicated (sparse allreduce of embedding gradients) or table-wise (tables spread over ranks, "
                "alltoall of lookups and their gradients)")
      ->capture_default_str();
  c->add_option("--emb-codec-fwd", a->emb_codec_fwd, "Table-wise: codec of the lookups alltoall: fp32, q8, q4, q2")
      ->capture_default_str();
  c->add_option("--emb-codec-bwd", a->emb_codec_bwd, "Table-wise: codec of the gradients alltoall: fp32, q8, q4, q2")
      ->capture_default_str();
  c->add_option("--emb-row-len", a->emb_row_len,
                "Table-wise: values per quantization row of the alltoalls (each with an fp16 scale and bias)")
      ->capture_default_str()
      ->check(kPositive);
  c->add_option("--mp-splits", a->mp_splits,
                "Model parallel: cut the MLPs after these layers, e.g. bot:2,top:2 (3 stages, one per rank)");
  c->add_option("--micro-batches", a->micro_batches, "Model parallel: micro-batches per step (GPipe schedule)")
      ->capture_default_str()
      ->check(kPositive);
  c->add_option("--mp-codec", a->mp_codec, "Model parallel: what crosses a cut: none, dct:ETA (DCT-MP), or the paper's negative baselines "
                "topk-grad:ETA, sketch:ETA")
      ->capture_default_str();
  c->add_option("--mp-threshold-eta", a->mp_threshold_eta,
                "Model parallel: --metrics logs the mean per-sample top-K threshold of X_act at the first cut at this "
                "sparsity (the DCT paper's Figure 5)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  c->add_option("--dp-mode", a->dp_mode,
                "allreduce (synchronous) or ps: the last --servers ranks are parameter servers, the others "
                "asynchronous workers")
      ->capture_default_str();
  c->add_option("--servers", a->servers, "--dp-mode ps: server ranks")->capture_default_str();
  c->add_option("--max-staleness", a->max_staleness,
                "--dp-mode ps: steps a worker may run ahead of the slowest (0: every pull sees the previous step)")
      ->capture_default_str();
  c->add_option("--ef-drain-every", a->ef_drain_every,
                "Error feedback: every N steps zero each residual element with probability --ef-drain-fraction (0: never)")
      ->capture_default_str();
  c->add_option("--ef-drain-fraction", a->ef_drain_fraction, "Error feedback: drain probability")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  c->add_option("--fail-at", a->fail_at,
                "Testing: rank R dies at step S (R:S; under mpiexec it kills itself, in-process it falls silent)");
  c->add_option("--target-loss", a->target_loss,
                "Stop at the first test whose loss is <= this and print the training time to reach it (tests at "
                "--test-freq; 0: none)")
      ->capture_default_str();
  c->add_option("--target-auc", a->target_auc,
                "Stop at the first test whose AUC is >= this and print the training time to reach it (0: none)")
      ->capture_default_str();
  c->add_option("--verify-freq", a->verify_freq, "Check every N steps that all ranks hold identical parameters")
      ->capture_default_str();
  c->add_option("--net", a->net,
                "Emulate a network for the --ranks in-process ranks, e.g. 10gbit,20us (bandwidth per link, latency "
                "per message): every message is timed by an alpha-beta model and each rank computes on one thread, "
                "timed by that thread's CPU time; progress lines, metrics and the summary add the modelled times");
  c->add_option("--compute-scale", a->compute_scale,
                "With --net: a rank's modelled computation is its thread's CPU time times this (2: hosts half as "
                "fast as this machine's cores)")
      ->capture_default_str();
  c->add_option("--host-cores", a->host_cores,
                "With --net: the cores a rank's threads (training and communication) compute on; fewer cores than "
                "threads and their computation no longer overlaps (0: a core for each thread)")
      ->capture_default_str();
  c->add_option("--timeout", a->timeout_s, "Seconds a rank waits for a peer before failing")
      ->capture_default_str()
      ->check(kPositive);
  c->callback([a, c, &run] {
    for (const CLI::Option* o : c->get_options()) {
      if (o->get_lnames().empty() || o->get_lnames().front() == "help") continue;
      std::string v;
      if (o->get_type_size() == 0) v = o->count() > 0 ? "true" : "false";  // a flag
      else if (o->count() > 0) v = o->results().back();
      else v = o->get_default_str();
      a->flag_values.emplace_back(o->get_lnames().front(), v);
    }
    run = [a] { run_train(*a); };
  });
}

}  // namespace sparq::cli
