#include "tools/train_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sparq/core/error.h"
#include "sparq/core/memory.h"
#include "sparq/core/units.h"
#include "sparq/model/blas.h"
#include "sparq/model/checkpoint.h"
#include "sparq/transport/net_model.h"
#include "tools/synthetic_data.h"

namespace sparq::cli {

namespace {

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

DlrmConfig model_config(const TrainArgs& a) {
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
  return cfg;
}

// --fuse-bytes auto: 1 MiB where the dense exchange is compressed and data
// parallel's communication thread runs it, else every tensor alone. On the
// 4-host cluster each of the 18 compressed plans of sparq plan's sweep ran
// 1.09-1.33x faster fused by 1 MiB than unfused, and 4 MiB was within -3 to
// +9 % of 1 MiB; the fp32 plans ran 0.96-1.05x as fast fused by 1 MiB and
// slower by 4 MiB (docs/results.md, "Choosing a plan").
std::string fuse_bytes(const TrainArgs& a) {
  if (a.fuse_bytes != "auto") return a.fuse_bytes;
  return a.dp_codec != "none" && a.mp_splits.empty() && a.dp_mode == "allreduce" ? "1MiB" : "0";
}

DataParallelOptions dp_options(const TrainArgs& a) {
  DataParallelOptions dpo;
  dpo.codec = parse_dp_codec(a.dp_codec, a.dp_allreduce);
  dpo.placement = parse_emb_placement(a.emb_placement);
  dpo.emb_fwd = emb_codec(a.emb_codec_fwd, "--emb-codec-fwd");
  // Replicated tables: --emb-codec-bwd bf16 is their gradients' exchange in bf16.
  const bool table_wise = dpo.placement == EmbPlacement::TableWise;
  SPARQ_CHECK_AS(InputError, table_wise || a.emb_codec_bwd == "fp32" || a.emb_codec_bwd == "bf16",
                 "--emb-codec-bwd with replicated tables is their gradients' exchange: fp32 or bf16, got '{}' (q8, "
                 "q4 and q2 quantize the table-wise alltoall)", a.emb_codec_bwd);
  SPARQ_CHECK_AS(InputError, !table_wise || a.emb_codec_bwd != "bf16",
                 "--emb-codec-bwd bf16 is the replicated tables' gradient exchange; the table-wise alltoall takes "
                 "fp32, q8, q4 or q2");
  if (a.emb_codec_bwd == "bf16") dpo.emb_grad_values = compress::ValueFormat::Bf16;
  else dpo.emb_bwd = emb_codec(a.emb_codec_bwd, "--emb-codec-bwd");
  dpo.emb_row_len = a.emb_row_len;
  SPARQ_CHECK_AS(InputError, table_wise || (a.emb_codec_fwd == "fp32" && a.emb_row_len == 32),
                 "--emb-codec-fwd/--emb-row-len quantize the table-wise alltoall: they need --emb-placement "
                 "table-wise");
  dpo.overlap = !a.no_overlap;
  dpo.fuse_bytes = parse_bytes(fuse_bytes(a));
  dpo.comm_nice = a.comm_nice.value_or(kDefaultCommNice);
  dpo.skip_non_finite = a.non_finite == "skip";
  return dpo;
}

// --dp-mode ps: what a parameter server can serve.
void check_ps(const TrainArgs& a, int world, std::size_t nstages, const DataParallelOptions& dpo) {
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
  SPARQ_CHECK_AS(InputError, dpo.emb_grad_values == compress::ValueFormat::F32,
                 "--emb-codec-bwd bf16 is the data-parallel ranks' gradient exchange; --dp-mode ps pushes fp32");
  SPARQ_CHECK_AS(InputError, !dpo.skip_non_finite,
                 "--non-finite skip is built for data parallelism and --mp-splits; --dp-mode ps stops on a NaN or inf "
                 "(fail)");
  SPARQ_CHECK_AS(InputError, dpo.codec.kind == DpCodec::Kind::None || dpo.codec.kind == DpCodec::Kind::Dct,
                 "--dp-mode ps pushes dense gradients with --dp-codec none or dct:ETA,L, not '{}'", a.dp_codec);
}

// --mp-splits: stages, replicas of them, and what applies between them.
void check_mp(const TrainArgs& a, int world, std::size_t nstages, const DataParallelOptions& dpo) {
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
}

}  // namespace

void check_run_flags(const TrainArgs& a) {
  SPARQ_CHECK_AS(InputError, a.threads >= 1, "--threads must be >= 1");
  SPARQ_CHECK_AS(InputError, a.batch >= 1, "--mini-batch-size must be >= 1");
  SPARQ_CHECK_AS(InputError, a.test_batch >= 1, "--test-mini-batch-size must be >= 1");
  SPARQ_CHECK_AS(InputError, a.save_every == 0 || !a.save.empty(), "--save-every needs --save PATH");
  SPARQ_CHECK_AS(InputError,
                 a.save_whole_every == 0 || (a.save_every > 0 && a.save_whole_every % a.save_every == 0 &&
                                             a.save.find("{step}") != std::string::npos),
                 "--save-whole-every N needs --save-every K dividing N and \"{{step}}\" in --save (deltas follow "
                 "one another in files of their own)");
  // Rank 0's optimizer sees every change only where it updates every table.
  SPARQ_CHECK_AS(InputError,
                 a.save_whole_every == 0 || (a.emb_placement == "replicated" && a.mp_splits.empty() &&
                                             a.dp_mode == "allreduce"),
                 "--save-whole-every is built for data-parallel runs with replicated tables; with --emb-placement "
                 "table-wise, --mp-splits or --dp-mode ps every checkpoint is whole");
  SPARQ_CHECK_AS(InputError, a.test_freq >= -1, "--test-freq must be N > 0, 0 (each epoch's end) or -1 (never), got {}",
                 a.test_freq);
  SPARQ_CHECK_AS(InputError, a.test_freq >= 0 || (a.target_loss == 0 && a.target_auc == 0),
                 "--target-loss/--target-auc are checked at tests: --test-freq -1 never tests");
  SPARQ_CHECK_AS(InputError, std::isfinite(a.target_loss) && a.target_loss >= 0,
                 "--target-loss must be a test loss > 0 (or 0: none), got {}", a.target_loss);
  SPARQ_CHECK_AS(InputError, a.target_auc >= 0 && a.target_auc <= 1, "--target-auc must be in (0, 1] (or 0: none), got {}",
                 a.target_auc);
}

PlanOptions plan_options(const TrainArgs& a, int world) {
  PlanOptions p;
  p.cfg = model_config(a), p.seed = a.seed;
  p.optimizer.lr = a.lr, p.optimizer.dense = parse_dense_optim(a.optimizer), p.optimizer.schedule = lr_schedule(a);
  p.optimizer_name = a.optimizer, p.embedding_optimizer_name = a.emb_optim;
  p.dp = dp_options(a);
  p.mp_codec = parse_mp_codec(a.mp_codec);
  p.mp_splits = a.mp_splits, p.micro_batches = a.micro_batches, p.mp_threshold_eta = a.mp_threshold_eta;
  p.drain = {a.ef_drain_every, a.ef_drain_fraction, a.seed};
  const std::size_t nstages = plan_stages(p.cfg, a.mp_splits).size();
  SPARQ_CHECK_AS(InputError, !a.comm_nice || world > 1,
                 "--comm-nice sets the communication thread's priority: one rank has none");
  SPARQ_CHECK_AS(InputError, a.dp_mode == "allreduce" || a.dp_mode == "ps", "--dp-mode must be allreduce or ps, got '{}'",
                 a.dp_mode);
  SPARQ_CHECK_AS(InputError, a.dp_mode == "ps" || (a.servers == 1 && a.max_staleness == 0),
                 "--servers and --max-staleness need --dp-mode ps");
  if (a.dp_mode == "ps") {
    check_ps(a, world, nstages, p.dp);
    p.servers = a.servers, p.max_staleness = a.max_staleness;
  }
  if (nstages > 1) {
    check_mp(a, world, nstages, p.dp);
  } else {
    SPARQ_CHECK_AS(InputError, a.mp_codec == "none" && a.micro_batches == 1 && a.mp_threshold_eta == 0.95,
                   "--mp-codec, --micro-batches and --mp-threshold-eta act between model-parallel stages: they need "
                   "--mp-splits");
  }
  p.optimizer.embedding = parse_embedding_optim(a.emb_optim);
  p.optimizer.track_changes = a.save_whole_every > 0;  // incremental checkpoints write the changed rows
  return p;
}

KernelCosts* kernel_costs(const TrainArgs& a) {
  static KernelCosts costs;
  static std::string read;
  if (a.kernel_costs == "measured") return nullptr;
  if (a.kernel_costs != "run" && a.kernel_costs != read) {
    SPARQ_CHECK_AS(InputError, read.empty(), "--kernel-costs {} after {}: one file a process", a.kernel_costs, read);
    costs.load(a.kernel_costs);
    read = a.kernel_costs;
  }
  return &costs;
}

void save_kernel_costs(const TrainArgs& a) {
  if (KernelCosts* c = kernel_costs(a); c && a.kernel_costs != "run") c->save(a.kernel_costs);
}

LaunchOptions launch_options(const TrainArgs& a, bool in_process) {
  SPARQ_CHECK_AS(InputError, a.net.empty() || (a.ranks > 0 && (in_process || launch_mode() == "local")),
                 "--net emulates the network between in-process ranks: give --ranks P (under mpiexec the network is "
                 "real)");
  LaunchOptions lo;
  if (!a.net.empty()) lo.net = parse_net_model(a.net);
  SPARQ_CHECK_AS(InputError, std::isfinite(a.compute_scale) && a.compute_scale > 0,
                 "--compute-scale must be > 0, got {}", a.compute_scale);
  SPARQ_CHECK_AS(InputError, a.compute_scale == 1 || lo.net,
                 "--compute-scale scales the modelled computation: it needs --net");
  SPARQ_CHECK_AS(InputError, a.host_cores >= 0, "--host-cores must be >= 0 (0: a core per thread), got {}",
                 a.host_cores);
  SPARQ_CHECK_AS(InputError, a.host_cores == 0 || lo.net, "--host-cores shapes the modelled computation: it needs --net");
  SPARQ_CHECK_AS(InputError, a.shared_cores >= 0, "--shared-cores must be >= 0 (0: not shared), got {}",
                 a.shared_cores);
  SPARQ_CHECK_AS(InputError, a.shared_cores == 0 || lo.net,
                 "--shared-cores shapes the modelled computation: it needs --net");
  SPARQ_CHECK_AS(InputError, a.shared_cores == 0 || a.host_cores == 0,
                 "--host-cores (each rank's own) and --shared-cores (all ranks') describe the cores two ways: give "
                 "one");
  lo.ranks = a.ranks;
  lo.in_process = in_process;
  lo.timeout = std::chrono::milliseconds(static_cast<long long>(a.timeout_s * 1000));
  lo.cpu_scale = lo.net ? a.compute_scale : 0;
  lo.host_cores = a.host_cores;
  lo.shared_cores = a.shared_cores;
  SPARQ_CHECK_AS(InputError, a.kernel_costs == "measured" || lo.net,
                 "--kernel-costs says how the clock charges computation: it needs --net");
  lo.kernel_costs = kernel_costs(a);
  // With --net a rank computes on one thread unless --threads is given (or a
  // plan sets it): then its threads are emulated on the clock.
  const bool threads_given = std::find(a.given.begin(), a.given.end(), "threads") != a.given.end();
  lo.threads = threads_given ? a.threads : 1;
  return lo;
}

TrainerOptions trainer_options(const TrainArgs& a, const PlanOptions& p) {
  TrainerOptions o;
  o.nepochs = a.nepochs, o.num_batches = a.num_batches, o.batch = a.batch, o.test_batch = a.test_batch;
  o.print_freq = a.print_freq, o.test_freq = a.test_freq, o.verify_freq = a.verify_freq;
  o.shuffle = !a.no_shuffle, o.shuffle_buffer = a.shuffle_buffer, o.skip_bad_lines = a.skip_bad_lines;
  o.seed = a.seed, o.target_loss = a.target_loss, o.target_auc = a.target_auc;
  o.load = a.load, o.save = a.save, o.save_every = a.save_every, o.save_whole_every = a.save_whole_every;
  nlohmann::json& meta = o.checkpoint_meta;
  meta["seed"] = a.seed;
  meta["model"] = p.cfg.describe();
  meta["config"] = checkpoint_config_json(p.cfg);
  meta["embedding_optimizer"] = a.emb_optim;
  meta["optimizer"] = a.optimizer;
  if (!a.mp_splits.empty()) {  // predict runs the model as it trained: with the codec at its cuts
    meta["mp_splits"] = a.mp_splits;
    meta["mp_codec"] = a.mp_codec;
  }
  if (!a.fail_at.empty()) {  // --fail-at RANK:STEP (testing failure handling): that rank dies there
    const auto colon = a.fail_at.find(':');
    SPARQ_CHECK_AS(InputError, colon != std::string::npos, "--fail-at expects RANK:STEP, got '{}'", a.fail_at);
    o.fail_rank = std::stol(a.fail_at.substr(0, colon));
    o.fail_step = std::stoull(a.fail_at.substr(colon + 1));
  }
  o.threads = a.threads, o.net = a.net, o.ranks_here = std::max(1, a.ranks);
  return o;
}

// A lower bound (tables and activations, not the optimizer state, data or
// buffers), so a run it lets through may still be tight.
void check_train_memory(const TrainArgs& a, const PlanOptions& p, int world) {
  const DlrmConfig& cfg = p.cfg;
  const std::size_t nstages = plan_stages(cfg, a.mp_splits).size();
  const double ranks_here = a.ranks > 0 ? a.ranks : 1;  // in-process ranks, or one per mpiexec process
  double tables = 0;
  for (std::size_t r : cfg.table_rows) tables += static_cast<double>(r) * static_cast<double>(cfg.emb_dim) * 4;
  // Replicated: every replica in this process holds every table; table-wise:
  // the world's replicas share them, and with in-process replicas, replica 0
  // also holds a copy of them all (it gathers the model).
  tables *= p.dp.placement == EmbPlacement::Replicated
                ? std::max(1.0, ranks_here / static_cast<double>(nstages))
                : ranks_here / world + (a.ranks > static_cast<int>(nstages) ? 1 : 0);
  check_memory(tables, "the embedding tables");
  double widths = static_cast<double>(cfg.interaction_width() + cfg.num_tables() * cfg.emb_dim);
  for (std::size_t w : cfg.bot_mlp) widths += static_cast<double>(w);
  for (std::size_t w : cfg.top_mlp) widths += static_cast<double>(w);
  // Activations and their gradients of the whole batch, shared by the ranks.
  const double batch = static_cast<double>(a.batch) * widths * 4 * 2 * ranks_here / world;
  check_memory(tables + batch, fmt::format("the embedding tables and a mini-batch of {}", a.batch));
}

}  // namespace sparq::cli
