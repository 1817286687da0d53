// `sparq plan --trial N`: the plans the clock cannot tell apart, trained on
// the hosts themselves. The clock ranks the whole space in a minute, but on
// a machine whose speed moves, plans a few % apart come out in either order
// (on the 4-host cluster one plan's runs on the clock took 44.9 and 54.5 ms
// a step), and what real hosts pay for fusion moved with their processor
// where the clock's charge did not. The hosts' own steps decide among the
// leaders: first the clock's leaders, then the fastest of them at each
// fusion size (the knob whose cost the clock and the shaped cluster agreed
// on least), each stage's plans in interleaved rounds.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <thread>

#include "sparq/coll/broadcast.h"
#include "sparq/coll/call.h"
#include "sparq/core/error.h"
#include "sparq/plan/plan_file.h"
#include "sparq/model/blas.h"
#include "sparq/model/parallel.h"
#include "sparq/train/trainer.h"
#include "tools/bench_table.h"
#include "tools/plan.h"
#include "tools/train_data.h"
#include "tools/train_options.h"

namespace sparq::cli {

namespace {

// The leaders: the admitted plans within this of the clock's fastest. One
// plan's runs on the clock moved by 5-15 % on this shared machine (and by
// 21 % once, 44.9 against 54.5 ms): closer than that the clock cannot
// order them.
constexpr double kTrialWithin = 0.15;

class IntervalSink final : public TrainerSink {
 public:
  void line(const std::string&) override {}
  void event(const nlohmann::json& e) override {
    if (e["event"] == "train") ms.push_back(e["ms_per_it"].get<double>());
  }
  std::vector<double> ms;
};

// One plan trained `steps` steps on the hosts: rank 0's ms a step (0 on the others).
double train_on_hosts(Transport& t, const TrainArgs& base, const TrainData& data, const plan::PlanKnobs& k,
                      std::size_t steps) {
  TrainArgs a = with_knobs(base, k);
  a.print_freq = kTrialPrintFreq, a.test_freq = -1;
  run_for_steps(a, data, steps);
  set_blas_threads(k.threads);
  set_compute_threads(k.threads);
  const PlanOptions po = plan_options(a, t.size());
  check_train_memory(a, po, t.size());
  const TrainerOptions to = trainer_options(a, po);
  IntervalSink sink;
  {
    const std::unique_ptr<Plan> p = make_plan(t, po);
    train(*p, data, to, sink);
  }
  barrier(t);  // the next plan starts on every host together
  if (t.rank() != 0) return 0;  // rank 0 reports the steps
  SPARQ_CHECK_AS(InputError, sink.ms.size() > 1, "--trial {}: fewer than two intervals of {} steps to time", steps,
                 kTrialPrintFreq);
  sink.ms.erase(sink.ms.begin());
  return percentile(sink.ms, 0.5);
}

// Rank 0's plans to every host (the others wait for them up to
// max_wait_s, the run's --timeout: rank 0 plans on the clock first); an
// empty list ends the trial.
std::vector<plan::PlanKnobs> share_plans(Transport& t, const std::vector<plan::PlanKnobs>& plans,
                                         double max_wait_s) {
  if (t.rank() == 0) {
    const std::string text = plan::plans_text(plans);
    for (int r = 1; r < t.size(); ++r)
      t.send(r, tags::kPlanTrial, std::as_bytes(std::span(text.data(), text.size())));
    return plans;
  }
  // Polled every 20 ms, not spun on: the waiting hosts may share a machine
  // with rank 0, whose clock charges the CPU time its runs use.
  Request req = t.irecv_message(0, tags::kPlanTrial);
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(max_wait_s));
  while (!req.test()) {
    SPARQ_CHECK_AS(TimeoutError, Clock::now() < deadline,
                   "--trial: rank 0 sent no plans to train in {:.0f} s (its planning on the clock takes longer: "
                   "raise --timeout)", max_wait_s);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const std::vector<std::byte> msg = req.take_message();
  const std::vector<plan::PlanKnobs> got = plan::plans_from_text(
      std::string(reinterpret_cast<const char*>(msg.data()), msg.size()), "--trial: rank 0's plans");
  const std::vector<plan::PlanKnobs> space = plan::plan_space(t.size());
  for (plan::PlanKnobs k : got) {
    k.threads = 1;  // the space's plans run one thread a rank, the leaders more
    SPARQ_CHECK_AS(InputError, std::find(space.begin(), space.end(), k) != space.end(),
                   "--trial: rank 0 sent a plan outside the space for {} ranks: {}", t.size(), k.label());
  }
  return got;
}

// Each plan trained `steps` steps on the hosts with base's model and data,
// `rounds` interleaved rounds: rank 0's ms/step, plan by plan and round by
// round.
std::vector<std::vector<double>> trial_on_hosts(Transport& t, const TrainArgs& base, const TrainData& data,
                                                const std::vector<plan::PlanKnobs>& plans, std::size_t steps,
                                                std::size_t rounds) {
  std::vector<std::vector<double>> ms(plans.size());
  // Each round starts one plan later, so that no plan is always first
  // (after the planning) or always after the same one.
  for (std::size_t r = 0; r < rounds; ++r)
    for (std::size_t j = 0; j < plans.size(); ++j) {
      const std::size_t i = (j + r) % plans.size();
      ms[i].push_back(train_on_hosts(t, base, data, plans[i], steps));
    }
  return ms;
}

// The hosts' own runs of the trial: no network model, a whole core a thread.
TrainArgs on_the_hosts(TrainArgs t) {
  t.net.clear(), t.compute_scale = 1, t.host_cores = t.shared_cores = 0, t.ranks = 0, t.metrics.clear();
  return t;
}

void print_trial(const TrialOptions& o, const std::string& what, const std::vector<const plan::Candidate*>& plans,
                 const std::vector<std::vector<double>>& ms, const std::vector<double>& relative) {
  fmt::print("on the hosts: {}, {} round(s) of {} steps; ms/step: the median of a run's {}-step intervals after its "
             "first; vs round: against the round's median plan, the median of the rounds\n", what, o.rounds, o.steps,
             kTrialPrintFreq);
  fmt::print("  {:<60} {:>9} {:>9} {:>9}  {}\n", "plan", "modelled", "measured", "vs round", "round by round");
  for (std::size_t i = 0; i < plans.size(); ++i)
    fmt::print("  {:<60} {:>9.2f} {:>9.2f} {:>9.3f}  {:.2f}\n", plans[i]->knobs.label(), plans[i]->run->ms_per_step,
               percentile(ms[i], 0.5), relative[i], fmt::join(ms[i], ", "));
}

// The fastest of `plans` that the hosts measured, by its step against its
// round's median plan: a round is one stretch of time, and on a shared
// machine whole rounds run slower (on the cluster five of seven plans took
// 1.16-1.32x their step of the round before in one trial's third round). A
// leader's longer run on the clock, where it has one, stands for it (as
// when the clock chooses).
const plan::Candidate* fastest_measured(const std::vector<plan::Candidate>& all,
                                        const std::vector<plan::PlanKnobs>& plans) {
  const plan::Candidate* best = nullptr;
  for (const plan::Candidate& c : all)
    if (!c.on_hosts.empty() && c.verdict.admitted && std::find(plans.begin(), plans.end(), c.knobs) != plans.end() &&
        (!best || c.on_hosts_relative < best->on_hosts_relative ||
         (c.knobs == best->knobs && c.refined && !best->refined)))
      best = &c;
  return best;
}

// Each plan's step over its round's median step (the mean of the middle
// two for an even count), the median over the rounds.
std::vector<double> relative_steps(const std::vector<std::vector<double>>& ms) {
  std::vector<std::vector<double>> ratios(ms.size());
  for (std::size_t r = 0; r < ms.front().size(); ++r) {
    std::vector<double> round;
    for (const std::vector<double>& plan : ms) round.push_back(plan[r]);
    std::sort(round.begin(), round.end());
    const double mid = (round[(round.size() - 1) / 2] + round[round.size() / 2]) / 2;
    for (std::size_t i = 0; i < ms.size(); ++i) ratios[i].push_back(ms[i][r] / mid);
  }
  std::vector<double> out;
  for (const std::vector<double>& r : ratios) out.push_back(percentile(r, 0.5));
  return out;
}

// A stage of --trial on rank 0: the hosts train `stage`, and each
// candidate of those plans notes their rounds (a later stage's replace an
// earlier's: a stage's plans are compared with each other, in time).
// Returns the stage's fastest.
const plan::Candidate* trial_stage(Transport& t, const TrainArgs& args, const TrialOptions& o, const TrainData& data,
                                   std::vector<plan::Candidate>& all, const std::vector<const plan::Candidate*>& stage,
                                   const std::string& what) {
  std::vector<plan::PlanKnobs> plans;
  for (const plan::Candidate* c : stage) plans.push_back(c->knobs);
  share_plans(t, plans, args.timeout_s);
  const std::vector<std::vector<double>> ms = trial_on_hosts(t, on_the_hosts(args), data, plans, o.steps, o.rounds);
  const std::vector<double> relative = relative_steps(ms);
  print_trial(o, what, stage, ms, relative);
  for (plan::Candidate& c : all)
    for (std::size_t i = 0; i < plans.size(); ++i)
      if (c.knobs == plans[i]) c.on_hosts = ms[i], c.on_hosts_relative = relative[i];
  return fastest_measured(all, plans);
}

}  // namespace

void follow_trial(Transport& t, const TrainArgs& args, const TrialOptions& o) {
  const TrainData data = load_data(args);
  for (std::vector<plan::PlanKnobs> plans; !(plans = share_plans(t, {}, args.timeout_s)).empty();)
    trial_on_hosts(t, on_the_hosts(args), data, plans, o.steps, o.rounds);
}

const plan::Candidate* decide_on_hosts(Transport& t, const TrainArgs& args, const TrialOptions& o,
                                       const TrainData& data, std::vector<plan::Candidate>& all) {
  const plan::Candidate* best =
      trial_stage(t, args, o, data, all, plan::trial_set(all, kTrialWithin, o.plans),
                  fmt::format("the leaders (within {:.0f} % of the fastest on the clock) and the fastest fp32 plan",
                              100 * kTrialWithin));
  const std::vector<const plan::Candidate*> fusions = plan::fusion_variants(all, best->knobs);
  if (fusions.size() > 1) best = trial_stage(t, args, o, data, all, fusions, "the fastest of them at each fusion size");
  share_plans(t, {}, args.timeout_s);  // the end of the trial
  return best;
}

}  // namespace sparq::cli
