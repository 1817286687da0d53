// `sparq plan`: runs the plans of sparq/plan/'s space on the virtual clock
// for the user's model, data, rank count and network, prints them fastest
// first, and writes the fastest that the accuracy budget admits as a plan
// file for `sparq train --plan`.
#include "tools/plan.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <limits>
#include <map>
#include <memory>

#include "sparq/core/error.h"
#include "sparq/core/huge_pages.h"
#include "sparq/core/kernel_costs.h"
#include "sparq/core/memo.h"
#include "sparq/core/memory.h"
#include "sparq/core/units.h"
#include "sparq/model/blas.h"
#include "sparq/plan/bounds.h"
#include "sparq/plan/search.h"
#include "sparq/train/trainer.h"
#include "sparq/transport/launch.h"
#include "tools/bench_table.h"
#include "tools/commands.h"
#include "tools/train_data.h"
#include "tools/train_flags.h"
#include "tools/train_options.h"

namespace sparq::cli {

TrainArgs with_knobs(TrainArgs t, const plan::PlanKnobs& k) {
  t.emb_placement = k.placement, t.dp_codec = k.dp_codec, t.dp_allreduce = k.dp_allreduce;
  t.emb_codec_fwd = k.emb_fwd, t.emb_codec_bwd = k.emb_bwd, t.fuse_bytes = k.fuse, t.threads = k.threads;
  t.mlp_precision = k.mlp, t.mp_splits = k.mp_splits, t.micro_batches = static_cast<std::size_t>(k.micro_batches);
  t.mp_codec = k.mp_codec, t.dp_mode = k.dp_mode, t.servers = k.servers;
  for (const auto& [name, value] : k.flags())  // set as if given: --threads is then emulated under --net
    if (std::find(t.given.begin(), t.given.end(), name) == t.given.end()) t.given.push_back(name);
  return t;
}

void run_for_steps(TrainArgs& a, const TrainData& data, std::size_t steps) {
  // Every step a whole batch: where an epoch holds fewer than `steps`, the
  // run goes on into the next (the partial last batch is left out).
  const std::size_t samples = data.streaming() ? data.stream_lines() : data.train.size();
  const std::size_t per_epoch = samples / a.batch;
  SPARQ_CHECK_AS(InputError, per_epoch > 0,
                 "the training data has {} samples, fewer than one batch of {}: no step of the plans to time", samples,
                 a.batch);
  a.num_batches = std::min(steps, per_epoch);
  a.nepochs = (steps + a.num_batches - 1) / a.num_batches;
}

namespace {

struct PlanArgs {
  // Every plan of a search charged the same cost for a kernel's shape
  // (--kernel-costs run): measured CPU time follows the machine's load from
  // plan to plan and reorders near-ties (docs/results.md, "The cluster
  // again, the wait counted").
  TrainArgs t = [] {
    TrainArgs t;
    t.kernel_costs = "run";
    return t;
  }();
  int hosts = 0;
  std::size_t steps = 8, pilot = 0;
  std::string threads = "1,2";  // the thread counts a leader is run with
  double budget = 0.1;  // %
  bool exhaustive = false, measure = false;
  std::string host_memory = "0", out = "plan.json", metrics;
  std::string trainer = "sparq";  // --for: or "pytorch", the plans its examples can train
  TrialOptions trial;        // --trial, --trial-plans, --trial-rounds
  bool trial_shaped = false;  // --trial-plans or --trial-rounds given
};

constexpr std::size_t kTrialMinSteps = 3 * kTrialPrintFreq;  // two intervals timed

constexpr std::size_t kWarmupSteps = 2;  // not timed: first touches of the tables and buffers
constexpr std::size_t kRefineRuns = 3;   // a leader's refining run is this many times --steps

// Collects what rank 0 reports of a run: each step's modelled time, the
// bytes by entity, the final test loss.
class RunSink final : public TrainerSink {
 public:
  void line(const std::string&) override {}
  void event(const nlohmann::json& e) override {
    if (e["event"] == "test") loss = e["loss"].get<double>();
    if (e["event"] != "train" || e["step"].get<std::size_t>() <= kWarmupSteps) return;
    steps.push_back(e.value("modeled_ms_per_it", 0.0));
    if (e.contains("modeled_phase_ms")) {
      const auto& p = e["modeled_phase_ms"];
      compute.push_back(p["forward"].get<double>() + p["backward"].get<double>() + p["optimizer"].get<double>());
    }
    for (const auto& [name, x] : e["traffic"].items()) bytes[name] += x["bytes_per_step"].get<double>();
  }
  std::vector<double> steps, compute;
  std::map<std::string, double> bytes;
  std::optional<double> loss;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// `steps` steps of the plan on the virtual clock, tested at the end if `test`.
plan::Measured run_on_clock(const PlanArgs& a, const TrainData& data, const plan::PlanKnobs& k, std::size_t steps,
                            bool test) {
  TrainArgs t = with_knobs(a.t, k);
  t.ranks = a.hosts, t.print_freq = 1;
  run_for_steps(t, data, steps);
  t.test_freq = test ? 0 : -1;
  PlanOptions po = plan_options(t, a.hosts);
  po.whole_model_on_rank0 = test;  // a timing run neither tests nor saves: rank 0 keeps its own tables only
  check_train_memory(t, po, a.hosts);
  const TrainerOptions to = trainer_options(t, po);
  RunSink sink;
  launch(launch_options(t, true), [&](Transport& tr) {
    const std::unique_ptr<Plan> p = make_plan(tr, po);
    train(*p, data, to, sink);
  });
  SPARQ_CHECK_AS(InputError, !sink.steps.empty(), "plan {}: no step after the first {} to time", k.label(),
                 kWarmupSteps);
  plan::Measured m{median(sink.steps), median(sink.compute), {}, sink.loss};
  for (auto& [name, b] : sink.bytes) m.bytes_per_step[name] = b / static_cast<double>(sink.steps.size());
  return m;
}

std::size_t dense_params(const DlrmConfig& cfg) {
  std::size_t n = 0;
  auto mlp = [&n](std::size_t in, const std::vector<std::size_t>& widths) {
    for (std::size_t w : widths) n += in * w + w, in = w;
  };
  mlp(cfg.bot_mlp.front(), {cfg.bot_mlp.begin() + 1, cfg.bot_mlp.end()});
  mlp(cfg.interaction_width(), cfg.top_mlp);
  return n;
}

// The tables' bytes on the rank that holds the most of them (at least):
// table-wise spreads them over the replicas (a hybrid plan's replicas are
// pipelines of 2 stages), a parameter server's workers replicate them.
double table_bytes_per_rank(const plan::PlanKnobs& k, const DlrmConfig& cfg, int ranks) {
  std::vector<double> bytes;
  for (std::size_t r : cfg.table_rows) bytes.push_back(static_cast<double>(r * cfg.emb_dim) * 4);
  std::sort(bytes.rbegin(), bytes.rend());
  const std::size_t replicas = static_cast<std::size_t>(k.structure() == "hybrid" ? ranks / 2 : ranks);
  const std::size_t held = k.placement == "replicated" ? bytes.size() : (bytes.size() + replicas - 1) / replicas;
  double sum = 0;
  for (std::size_t i = 0; i < held; ++i) sum += bytes[i];
  return sum;
}

std::string format_bytes(double b) {
  return b >= 1 << 30 ? fmt::format("{:.1f} GiB", b / (1 << 30))
         : b >= 1 << 20 ? fmt::format("{:.2f} MiB", b / (1 << 20))
                        : fmt::format("{:.1f} KiB", b / 1024);
}

std::string bytes_text(const std::map<std::string, double>& b) {
  std::string s;
  for (const auto& [name, x] : b) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", name, format_bytes(x));
  return s;
}

void print_table(const std::vector<plan::Candidate>& all, double fp32_ms) {
  fmt::print("{:>4}  {:<60} {:>9} {:>8}  {}\n", "rank", "plan (*: a leader's longer run)", "ms/step", "vs fp32",
             "bytes/step (rank 0)");
  int rank = 0;
  for (const plan::Candidate& c : all) {
    if (!c.run) continue;
    fmt::print("{:>4}{} {:<60} {:>9.2f} {:>7.2f}x  {}\n", ++rank, c.refined ? "*" : " ", c.knobs.label(), c.run->ms_per_step,
               fp32_ms / c.run->ms_per_step, bytes_text(c.run->bytes_per_step));
    fmt::print("      accuracy: {}{}\n", c.verdict.admitted ? "" : "LEFT OUT: ", c.verdict.why);
  }
  // Left out for accuracy, or for what candidates() found (memory, the CPU, --for).
  auto reason = [](const plan::Candidate& c) {
    for (const char* other : {"memory", "bf16 MLPs", "--for pytorch"})
      if (c.verdict.why.starts_with(other)) return std::string(other);
    return c.skipped.substr(0, c.skipped.find(':'));
  };
  std::map<std::string, int> reasons;
  for (const plan::Candidate& c : all)
    if (!c.run) ++reasons[reason(c)];
  for (const auto& [why, n] : reasons) fmt::print("not run: {} plan{} ({})\n", n, n > 1 ? "s" : "", why);
}

void write_metrics(const std::string& path, const std::vector<plan::Candidate>& all) {
  if (path.empty()) return;
  std::ofstream f(path);
  SPARQ_CHECK_AS(InputError, f.good(), "cannot create '{}'", path);
  for (const plan::Candidate& c : all) {
    nlohmann::json j = {{"event", "plan"}, {"label", c.knobs.label()}, {"refined", c.refined}, {"admitted", c.verdict.admitted},
                        {"expected_change", c.verdict.expected_change}, {"accuracy", c.verdict.why},
                        {"bound_ms", c.bound_ms}, {"skipped", c.skipped}};
    for (const auto& [name, value] : c.knobs.flags()) j["flags"][name] = value;
    if (c.run) {
      j["modelled_ms_per_step"] = c.run->ms_per_step, j["compute_ms"] = c.run->compute_ms;
      j["bytes_per_step"] = c.run->bytes_per_step;
      if (c.run->test_loss) j["test_loss"] = *c.run->test_loss;
    }
    if (!c.on_hosts.empty())
      j["measured_ms_per_step"] = percentile(c.on_hosts, 0.5), j["measured_rounds_ms"] = c.on_hosts,
      j["measured_vs_round"] = c.on_hosts_relative;
    f << j.dump() << '\n';
  }
}

// A plan runs on the clock as in-process ranks of this process: every
// rank's tables, and about a quarter more for their gradients and buffers
// (a replicated plan at 128 ranks took 1.15x its tables), must fit here,
// and one first copy of every table, kept for the next plan (memo.h).
constexpr double kEmulationShare = 1.25;

// Every plan of the space with its accuracy verdict, its bound, and left
// out where its tables do not fit a host, or its ranks this machine.
std::vector<plan::Candidate> candidates(const PlanArgs& a, const DlrmConfig& cfg, const NetModel& net) {
  const double here = static_cast<double>(available_memory());
  const double memory = a.host_memory == "0" ? here : static_cast<double>(parse_bytes(a.host_memory));
  const plan::PlanShape shape{dense_params(cfg), cfg.num_tables(), cfg.emb_dim, a.t.batch, a.hosts};
  const double kept = table_bytes_per_rank(plan::PlanKnobs{}, cfg, 1);  // every table, once
  std::vector<plan::Candidate> all;
  for (const plan::PlanKnobs& k : plan::plan_space(a.hosts)) {
    plan::Candidate c{
        k, a.pilot ? plan::Verdict{true, 0, "pilot"} : plan::judge(k, a.hosts, a.budget), 0, {}, "", false, {}, 0};
    c.bound_ms = 1e3 * plan::min_bytes_sent(k, shape) * net.beta_s_per_b;
    const double tables = table_bytes_per_rank(k, cfg, a.hosts);
    // The examples keep DDP's buckets (25 MB by default: one for a model of
    // a few MB of gradients), which sparq's largest fusion stands for.
    if (a.trainer == "pytorch" && (k.structure() != "dp" || k.placement != "table-wise" || k.fuse != "4MiB"))
      c.verdict = {false, 0,
                   "--for pytorch: the PyTorch examples train data parallel, the tables table-wise, in DDP's "
                   "buckets (planned as 4 MiB fusion)"};
    else if (k.mlp == "bf16" && !bf16_gemm_unavailable().empty())
      c.verdict = {false, 0, "bf16 MLPs: " + bf16_gemm_unavailable()};
    else if (tables > memory)
      c.verdict = {false, 0, fmt::format("memory: {} of tables a rank, {} a host", format_bytes(tables),
                                         format_bytes(memory))};
    else if (kEmulationShare * tables * a.hosts + kept > here)
      c.verdict = {false, 0, fmt::format("memory: running {} ranks on the clock here needs about {}, this machine "
                                         "has {}", a.hosts, format_bytes(kEmulationShare * tables * a.hosts + kept),
                                         format_bytes(here))};
    all.push_back(std::move(c));
  }
  SPARQ_CHECK_AS(InputError, std::any_of(all.begin(), all.end(), [](const auto& c) { return c.verdict.admitted; }),
                 "no plan fits: {}", all.front().verdict.why);
  return all;
}

// --threads-choices: "1,2" -> {1, 2}; throws InputError.
std::vector<int> thread_choices(const std::string& list) {
  std::vector<int> out;
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    out.push_back(plan::knobs_from_flags({{"threads", list.substr(at, comma - at)}}).threads);
    at = comma + 1;
  }
  return out;
}

// --threads-choices without the counts a host has no cores for: a rank's
// second thread on a host of one core (--host-cores 1), or of half a core
// (--shared-cores 2 over 4 hosts), waits for the core its first holds. The
// clock charged two threads a rank on the 4 hosts sharing 2 cores a little
// less than one; on the cluster the plan it chose so took 1.42x the step of
// the fastest measured there.
std::vector<int> runnable_threads(const PlanArgs& a) {
  const int cores = a.t.host_cores > 0    ? a.t.host_cores
                    : a.t.shared_cores > 0 ? std::max(1, a.t.shared_cores / a.hosts)
                                           : std::numeric_limits<int>::max();
  std::vector<int> out;
  for (int t : thread_choices(a.threads))
    if (t <= cores) out.push_back(t);
  SPARQ_CHECK_AS(InputError, !out.empty(), "--threads-choices {}: a host has cores for {} thread(s) a rank "
                 "(--host-cores {}, --shared-cores {} over {} hosts): give counts up to that", a.threads, cores,
                 a.t.host_cores, a.t.shared_cores, a.hosts);
  return out;
}

// The leaders' longer runs, at every runnable thread count; with
// --pilot, a plan's verdict from its test loss against the first fp32 plan's
// (every pilot starts from the same weights and data order).
plan::SearchOptions search_options(const PlanArgs& a, const TrainData& data, std::optional<double>& fp32_loss) {
  plan::SearchOptions so;
  so.exhaustive = a.exhaustive;
  // A replicated leader's gradients in bf16 too: where the budget admits
  // them they take a few per cent off a step (0.94x on the 4 hosts, 0.97x on
  // the clock at 8 ranks), and run in the first pass they doubled the
  // replicated plans run (planning at 8 ranks took 72 s, not 58).
  so.deferred = [](const plan::PlanKnobs& k) { return k.placement == "replicated" && k.emb_bwd == "bf16"; };
  so.variants = [threads = runnable_threads(a)](const plan::PlanKnobs& k) {
    std::vector<plan::PlanKnobs> grads{k};
    if (k.placement == "replicated" && k.emb_bwd == "fp32") grads.push_back(k), grads.back().emb_bwd = "bf16";
    std::vector<plan::PlanKnobs> out;
    for (const plan::PlanKnobs& g : grads)
      for (int t : threads) out.push_back(g), out.back().threads = t;
    return out;
  };
  so.refine = [&a, &data](const plan::PlanKnobs& k) { return run_on_clock(a, data, k, kRefineRuns * a.steps, false); };
  // The leaders are compared on kernel costs of the whole first pass, not
  // of the moment each kernel was first called: at 8 ranks on 10 Gbit/s
  // one search timed a replicated plan 6 % ahead of a table-wise one, the
  // next 4 % behind (docs/data/plan/deferred-check, p8-10gbit's two logs).
  so.before_refine = [&a] {
    if (KernelCosts* c = kernel_costs(a.t)) c->refit();
  };
  so.structure_floor = [&a, &data, floors = std::make_shared<std::map<std::string, double>>()](
                           const plan::PlanKnobs& k) {
    plan::PlanKnobs bare = k;  // the structure without codecs, one thread
    bare.dp_codec = "none", bare.dp_allreduce = "auto", bare.emb_fwd = bare.emb_bwd = "fp32", bare.mp_codec = "none";
    bare.threads = 1;
    const std::string key = bare.label();
    if (!floors->contains(key)) {
      PlanArgs infinite = a;
      infinite.t.net = "100000gbit,0us";
      (*floors)[key] = run_on_clock(infinite, data, bare, a.steps, false).ms_per_step;
    }
    return floors->at(key);
  };
  if (!a.pilot) return so;
  so.judge_run = [&a, &fp32_loss](const plan::PlanKnobs& k, const plan::Measured& m) {
    if (!fp32_loss) fp32_loss = m.test_loss;
    const double change = 100 * (*m.test_loss / *fp32_loss - 1);
    if (k.fp32()) return plan::Verdict{true, change, "fp32: no codec"};
    return plan::Verdict{change <= a.budget, change,
                         fmt::format("pilot: {:+.3f} % test loss against fp32 after {} steps on this data", change,
                                     a.pilot)};
  };
  return so;
}

// Rank 0's part of --trial: picks the plan among the candidates the clock
// ran (it may note on them what it measured, not add or remove any).
using Decide = std::function<const plan::Candidate*(std::vector<plan::Candidate>&, const TrainData&)>;

void print_chosen(const std::vector<plan::Candidate>& all, const plan::Candidate& best, const plan::Candidate& fp32,
                  double clock_s, double secs) {
  if (best.on_hosts.empty()) {
    fmt::print("chosen: {} — modelled {:.2f} ms/step, {:.2f}x the fastest fp32 plan ({}); planned in {:.1f} s\n",
               best.knobs.label(), best.run->ms_per_step, fp32.run->ms_per_step / best.run->ms_per_step,
               fp32.knobs.label(), secs);
    return;
  }
  const plan::Candidate* fp32_measured = &best;  // the trial holds the fastest fp32 plan of the clock's first runs
  for (const plan::Candidate& c : all)
    if (c.knobs.fp32() && !c.on_hosts.empty() &&
        (!fp32_measured->knobs.fp32() || percentile(c.on_hosts, 0.5) < percentile(fp32_measured->on_hosts, 0.5)))
      fp32_measured = &c;
  fmt::print("chosen: {} — measured {:.2f} ms/step on the hosts (modelled {:.2f}), {:.2f}x the fastest fp32 plan "
             "measured ({}); planned in {:.1f} s, {:.1f} s of it on the clock\n",
             best.knobs.label(), percentile(best.on_hosts, 0.5), best.run->ms_per_step,
             percentile(fp32_measured->on_hosts, 0.5) / percentile(best.on_hosts, 0.5), fp32_measured->knobs.label(),
             secs, clock_s);
}

plan::PlanFile choose_plan(const PlanArgs& a, const Decide& decide = {}) {
  const auto start = std::chrono::steady_clock::now();
  const ReuseMappings reuse;  // every plan's run builds the same tables again
  const Memo memo;            // from the same seeds, in every rank
  check_run_flags(a.t);
  SPARQ_CHECK_AS(InputError, a.budget >= 0, "--max-loss-change must be >= 0 (a change of the test loss, %), got {}",
                 a.budget);
  SPARQ_CHECK_AS(InputError, a.steps > kWarmupSteps + 1, "--steps must be > {}", kWarmupSteps + 1);
  SPARQ_CHECK_AS(InputError, a.pilot == 0 || a.pilot > kWarmupSteps + 1, "--pilot must be 0 or > {}",
                 kWarmupSteps + 1);
  const std::vector<int> threads = runnable_threads(a);  // checked before anything runs
  const NetModel net = parse_net_model(a.t.net);
  const DlrmConfig cfg = plan_options(a.t, a.hosts).cfg;
  fmt::print("sparq plan: {} ranks on {}, global batch {}, {}; budget {:+.3f} % test loss; {}\n", a.hosts,
             net.describe(), a.t.batch, cfg.describe(), a.budget,
             a.pilot ? fmt::format("pilots of {} steps", a.pilot) : "accuracy from the stored runs");
  fmt::print("space: data parallel (replicated or table-wise tables), dense codecs, alltoall codecs, fusion, fp32 or "
             "bf16 MLPs; hybrid (the bottom MLP over 2 stages, DCT-MP or nothing at the cut); a parameter server; on "
             "one thread a rank{}, the leaders again at {} thread(s) a rank{}{}\n",
             a.exhaustive || a.pilot ? "" : " (the replicated tables' gradients in fp32)", fmt::join(threads, ","),
             threads.size() < thread_choices(a.threads).size()
                 ? fmt::format(" (of --threads-choices {}: a host has no cores for more)", a.threads) : "",
             " and, replicated, with their gradients in bf16 too");
  std::vector<plan::Candidate> all = candidates(a, cfg, net);
  const TrainData data = load_data(a.t);
  SPARQ_CHECK_AS(InputError, !a.pilot || data.test.size() > 0, "--pilot needs test data (a test set to compare losses)");
  std::optional<double> fp32_loss;
  const plan::SearchOptions so = search_options(a, data, fp32_loss);
  all = plan::search(
      std::move(all),
      [&](const plan::PlanKnobs& k) { return run_on_clock(a, data, k, a.pilot ? a.pilot : a.steps, a.pilot > 0); },
      so);
  save_kernel_costs(a.t);
  const plan::Candidate* fp32 = plan::fastest(all, true);
  const plan::Candidate* best = plan::fastest(all);
  SPARQ_CHECK_AS(InputError, fp32, "no fp32 plan ran ({}): nothing to compare with", all.back().skipped);
  SPARQ_CHECK_AS(InputError, best, "no plan meets the budget of {:+.3f} %", a.budget);
  print_table(all, fp32->run->ms_per_step);
  const auto since_start = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const double clock_s = since_start();
  if (decide) best = decide(all, data);
  write_metrics(a.metrics, all);
  print_chosen(all, *best, *fp32, clock_s, since_start());
  return {best->knobs,           plan_model(a.t),        a.hosts,           a.t.batch,    net.describe(),
          best->run->ms_per_step, fp32->run->ms_per_step, best->verdict.why, SPARQ_VERSION,
          best->on_hosts.empty() ? 0 : percentile(best->on_hosts, 0.5)};
}

// --trial, on every host: rank 0 plans on the clock and has the hosts
// decide among its leaders (plan_trial.cc); the other hosts load the data
// while it plans, then train what it sends.
std::optional<plan::PlanFile> plan_with_trial(const PlanArgs& a, Transport& t) {
  if (t.rank() != 0) {
    follow_trial(t, a.t, a.trial);
    return std::nullopt;
  }
  return choose_plan(a, [&](std::vector<plan::Candidate>& all, const TrainData& data) {
    return decide_on_hosts(t, a.t, a.trial, data, all);
  });
}

void run_plan(PlanArgs a) {
  SPARQ_CHECK_AS(InputError, a.t.net.empty() != !a.measure,
                 "give the network to plan for: --net BW,LAT, or --measure under mpiexec on the hosts (not both)");
  SPARQ_CHECK_AS(InputError, a.trial.steps > 0 || !a.trial_shaped,
                 "--trial-plans and --trial-rounds shape a trial on the hosts: give --trial N with them");
  SPARQ_CHECK_AS(InputError, a.trial.steps == 0 || a.trial.steps >= kTrialMinSteps,
                 "--trial must be 0 or at least {} steps (a run's first {} are not timed), got {}", kTrialMinSteps,
                 kTrialPrintFreq, a.trial.steps);
  SPARQ_CHECK_AS(InputError, !a.measure || launch_mode() == "mpi",
                 "--measure times the network between the hosts: start sparq plan --measure under mpiexec, one "
                 "process a host (or with scripts/cluster run)");
  SPARQ_CHECK_AS(InputError, a.trial.steps == 0 || launch_mode() == "mpi",
                 "--trial trains the leading plans on the hosts themselves: start sparq plan under mpiexec, one "
                 "process a host (or with scripts/cluster run)");
  // Every process would plan the same on the clock and write the same file.
  SPARQ_CHECK_AS(InputError, a.measure || a.trial.steps || launch_mode() != "mpi",
                 "sparq plan --net plans on the virtual clock in one process: start it without mpiexec, or give "
                 "--measure or --trial to use the hosts mpiexec started");
  std::optional<plan::PlanFile> chosen;
  if (a.measure || a.trial.steps) {
    bool rank0 = false;
    LaunchOptions lo;
    lo.timeout = std::chrono::milliseconds(static_cast<long long>(a.t.timeout_s * 1000));
    launch(lo, [&](Transport& t) {
      rank0 = t.rank() == 0;
      SPARQ_CHECK_AS(InputError, t.size() == a.hosts, "--hosts {} but mpiexec started {} processes: one process a host",
                     a.hosts, t.size());
      if (a.measure) a.t.net = measure_net(t, a.t.timeout_s).value_or("");
      if (a.trial.steps) chosen = plan_with_trial(a, t);
    });
    // Without --trial rank 0 plans once MPI has ended: no host waits beside
    // the clock's runs. The other hosts' part has ended.
    if (!rank0) return;
  }
  if (!chosen) chosen = choose_plan(a);
  plan::write_plan_file(a.out, *chosen);
  fmt::print("wrote {} (sparq train --plan {})\n", a.out, a.out);
}

}  // namespace

plan::PlanFile plan_for(const TrainArgs& a, int world) {
  SPARQ_CHECK_AS(InputError, !a.net.empty() && a.ranks > 1,
                 "--plan auto plans for --ranks P in-process ranks on the --net network (or run sparq plan on the "
                 "cluster's network and pass its file)");
  PlanArgs p;
  p.t = a, p.hosts = world;  // the run's own --kernel-costs: the step it expects charged as it will train
  return choose_plan(p);
}

std::string plan_model(const TrainArgs& a) {
  const std::vector<std::size_t>& rows = plan_options(a, 1).cfg.table_rows;
  const bool same = std::all_of(rows.begin(), rows.end(), [&](std::size_t r) { return r == rows.front(); });
  return fmt::format("{}, rows {}", plan_options(a, 1).cfg.describe(),
                     same ? fmt::format("{} each", rows.front()) : join_dash_list(rows));
}

void apply_plan(const plan::PlanFile& p, const std::string& path, int world, const std::vector<std::string>& given,
                TrainArgs& a) {
  const std::string model = plan_model(a);
  SPARQ_CHECK_AS(InputError, p.model == model, "{}: a plan for another model ({}), not this one ({})", path, p.model,
                 model);
  SPARQ_CHECK_AS(InputError, p.ranks == world, "{}: a plan for {} ranks, this run has {}", path, p.ranks, world);
  SPARQ_CHECK_AS(InputError, p.global_batch == a.batch, "{}: a plan for a global batch of {}, this run has {}", path,
                 p.global_batch, a.batch);
  for (const auto& [name, value] : p.knobs.flags())
    SPARQ_CHECK_AS(InputError, std::find(given.begin(), given.end(), name) == given.end(),
                   "--{} is set by the plan {} ({}): give one or the other", name, path, value);
  a = with_knobs(std::move(a), p.knobs);
  for (auto& [name, value] : a.flag_values)  // the run's config line says what it ran
    for (const auto& [knob, v] : p.knobs.flags())
      if (name == knob) value = v;
}

void add_plan(CLI::App& app, Run& run) {
  auto a = std::make_shared<PlanArgs>();
  auto* c = app.add_subcommand("plan", "Choose the plan and codecs for P ranks on a network, on the virtual clock");
  add_model_flags(c, a->t);
  add_data_flags(c, a->t);
  c->add_option("--hosts", a->hosts, "Ranks (hosts) to plan for")->required()->check(kPositive);
  c->add_option("--net", a->t.net, "The network, BW,LAT[,CPU_PER_BYTE[,CPU_PER_MESSAGE[,LATENCY_PER_COLLECTIVE]]] (as sparq train --net)");
  c->add_flag("--measure", a->measure,
              "Measure the network instead of --net: run under mpiexec, one process a host; the hosts time sparq's ring "
              "allreduce and pairwise alltoall (16 KiB-4 MiB) together, the latency and bandwidth fitted to them are "
              "planned for on rank 0");
  c->add_option("--compute-scale", a->t.compute_scale, "A host's computation against this machine's core (as train)")
      ->capture_default_str();
  c->add_option("--host-cores", a->t.host_cores, "Cores a rank's threads compute on (as train; 0: one each)")
      ->capture_default_str();
  c->add_option("--shared-cores", a->t.shared_cores,
                "Cores all ranks' threads compute on (as train: hosts that share one machine; 0: not shared)")
      ->capture_default_str();
  c->add_option("--kernel-costs", a->t.kernel_costs,
                "How the clock charges the dense kernels (as train): 'measured', 'run' (one cost per kernel and "
                "shape for every plan of this search) or FILE (kept from run to run)")
      ->capture_default_str();
  c->add_option("--host-memory", a->host_memory, "Memory a host has for the tables (e.g. 64GiB; 0: this machine's)")
      ->capture_default_str();
  c->add_option("--max-loss-change", a->budget, "The accuracy budget: the test loss may rise this many % over fp32's")
      ->capture_default_str();
  c->add_option("--steps", a->steps, "Steps a plan runs on the virtual clock (the first 2 not timed); the leaders run "
                "again for 3 times as many")
      ->capture_default_str();
  c->add_option("--threads-choices", a->threads,
                "Threads a rank the leaders are run with (comma-separated; each rank's threads are emulated on the "
                "clock, on --host-cores cores; counts beyond the cores a host has are not run)")
      ->capture_default_str();
  c->add_option("--pilot", a->pilot,
                "Judge accuracy on this data instead of the stored runs: every plan run N steps from the same start "
                "as fp32, then tested (0: the stored runs)")
      ->capture_default_str();
  c->add_option("--for", a->trainer,
                "The trainer the plan is for: sparq (sparq train: the whole space) or pytorch (examples/dlrm_ddp.py "
                "and torchrec_dlrm.py, sparq.plan(): data-parallel plans with the tables table-wise, fused as DDP's "
                "buckets: 4 MiB)")
      ->check(CLI::IsMember({"sparq", "pytorch"}))
      ->capture_default_str();
  c->add_option("--trial", a->trial.steps,
                 "Under mpiexec, one process a host: train the leaders (the admitted plans within 15 % of the clock's "
                 "fastest, and the fastest fp32 plan; then the fastest at each fusion size) this many steps each on "
                 "the hosts themselves, and choose the fastest measured (0: choose on the clock alone)")
      ->capture_default_str();
  c->add_option("--trial-plans", a->trial.plans, "--trial: at most this many leaders (and the fastest fp32 plan)")
      ->check(kPositive)
      ->capture_default_str();
  c->add_option("--trial-rounds", a->trial.rounds, "--trial: interleaved rounds, each leader once a round")
      ->check(kPositive)
      ->capture_default_str();
  c->add_flag("--exhaustive", a->exhaustive, "Run every admitted plan, also those whose bound cannot win");
  c->add_option("--out", a->out, "The plan file to write")->capture_default_str();
  c->add_option("--metrics", a->metrics, "Write every plan (flags, bound, modelled step, bytes, verdict) as JSON lines");
  c->add_option("--timeout", a->t.timeout_s, "Seconds a rank waits for a peer")->capture_default_str();
  c->callback([a, c, &run] {
    a->trial_shaped = c->count("--trial-plans") + c->count("--trial-rounds") > 0;
    run = [a] { run_plan(*a); };
  });
}

}  // namespace sparq::cli
