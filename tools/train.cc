// `sparq train`: the DLRM reference's flags and output lines, on one rank or
// distributed (--ranks N threads, or one rank per mpiexec process): data
// parallel, model parallel / hybrid (--mp-splits) or parameter server
// (--dp-mode ps); docs/parallelism.md. The loop is the library's
// (sparq/train/trainer.h); this file checks the flags, loads the data and
// starts the ranks.
//
//   Finished training it i/n of epoch e, X ms/it, loss L, accuracy A %, S samples/s (data .. ms/it), eta T
//   Testing at - i/n of epoch e, loss L, accuracy A %, auc U, best auc B, ne N
//
// Data: --data-path DIR (train.{bin,tsv} and test.{bin,tsv}, as written by
// `sparq gen-data` / `sparq convert`) or FILE (+ --test-data-path), or
// --data-generation synthetic (teacher-labelled, generated in memory or read
// from / written to --data-cache DIR) or random (uniform, like the
// reference's --data-generation=random: for speed measurements only).
#include "tools/train.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <ctime>

#include "sparq/core/error.h"
#include "sparq/model/blas.h"
#include "sparq/model/parallel.h"
#include "sparq/train/trainer.h"
#include "sparq/transport/launch.h"
#include "tools/cli_sink.h"
#include "tools/plan.h"
#include "tools/provenance.h"
#include "tools/train_data.h"
#include "tools/train_options.h"

namespace sparq::cli {

namespace {

// The first line of a --metrics file: the run's whole configuration, every
// flag of `sparq train` by its name (without the dashes) under "flags", the
// ranks, the transport's name, sparq's version, the start time (UTC), and
// the build and machine it ran on (made_by: provenance.h's records).
nlohmann::json config_event(const TrainArgs& a, int ranks, std::string_view transport, const nlohmann::json& made_by) {
  nlohmann::json flags = nlohmann::json::object();
  for (const auto& [name, text] : a.flag_values) {  // numbers and booleans as such, the rest as given
    auto v = nlohmann::json::parse(text, nullptr, false);
    flags[name] = v.is_discarded() || !(v.is_number() || v.is_boolean()) ? nlohmann::json(text) : v;
  }
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char start[32];
  std::strftime(start, sizeof start, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return {{"event", "config"},
          {"flags", flags},
          {"ranks", ranks},
          {"transport", transport},
          {"version", SPARQ_VERSION},
          {"start_time", start},
          {"build", made_by.at("build")},
          {"machine", made_by.at("machine")}};
}

}  // namespace

void run_train(const TrainArgs& given) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines appear as they happen, also when piped
  TrainArgs a = given;
  check_run_flags(a);
  const int world = a.ranks > 0 ? a.ranks : mpiexec_world_size();
  std::optional<plan::PlanFile> chosen;
  if (!a.plan.empty()) {
    chosen = a.plan == "auto" ? plan_for(a, world) : plan::read_plan_file(a.plan);
    apply_plan(*chosen, a.plan, world, a.given, a);
  }
  set_blas_threads(a.threads);
  set_compute_threads(a.threads);
  const PlanOptions plan = plan_options(a, world);
  const LaunchOptions lo = launch_options(a);
  check_train_memory(a, plan, world);
  TrainerOptions to = trainer_options(a, plan);
  if (chosen) {
    to.plan_ms = chosen->modelled_ms;
    to.plan_line = fmt::format("plan {}: {} (for {} ranks on {}: modelled {:.2f} ms/step, {:.2f}x the fastest fp32 "
                               "plan{})",
                               a.plan, chosen->knobs.label(), chosen->ranks, chosen->net, chosen->modelled_ms,
                               chosen->fp32_ms / chosen->modelled_ms,
                               chosen->measured_ms > 0
                                   ? fmt::format("; measured {:.2f} ms/step on the hosts it was planned on",
                                                 chosen->measured_ms)
                                   : "");
  }
  // In-process ranks are threads of this process: one core each. With --net
  // a rank's computation is its thread's CPU time, its --threads emulated
  // (LaunchOptions::threads).
  if (a.ranks > 1 || lo.net) {
    set_blas_threads(1);
    set_compute_threads(1);
  }
  // Every process loads the data once; in-process ranks share it (read only).
  const TrainData data = load_data(a);
  // Read once here, not by every in-process rank at once.
  const nlohmann::json made_by = {{"build", build_record(parse_gemm_precision(a.mlp_precision))},
                                  {"machine", machine_record()}};
  launch(lo, [&](Transport& t) {
    CliSink sink(t.rank() == 0 ? a.metrics : "");
    TrainerOptions mine = to;
    mine.config = config_event(a, t.size(), t.name(), made_by);
    const std::unique_ptr<Plan> p = make_plan(t, plan);
    train(*p, data, mine, sink);
  });
  save_kernel_costs(a);
}

}  // namespace sparq::cli
