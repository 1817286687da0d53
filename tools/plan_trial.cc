// `sparq plan --trial N`: the plans the clock cannot tell apart, trained on
// the hosts themselves. The clock ranks the whole space in a minute, but on
// a machine whose speed moves, plans a few % apart come out in either order
// (on the 4-host cluster one plan's runs on the clock took 44.9 and 54.5 ms
// a step), and what real hosts pay for fusion moved with their processor
// where the clock's charge did not. The hosts' own steps decide among the
// leaders.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <thread>

#include "sparq/coll/broadcast.h"
#include "sparq/coll/call.h"
#include "sparq/core/error.h"
#include "sparq/model/blas.h"
#include "sparq/model/parallel.h"
#include "sparq/train/trainer.h"
#include "tools/bench_table.h"
#include "tools/plan.h"
#include "tools/train_options.h"

namespace sparq::cli {

namespace {

class IntervalSink final : public TrainerSink {
 public:
  void line(const std::string&) override {}
  void event(const nlohmann::json& e) override {
    if (e["event"] == "train") ms.push_back(e["ms_per_it"].get<double>());
  }
  std::vector<double> ms;
};

nlohmann::json plans_json(const std::vector<plan::PlanKnobs>& plans) {
  nlohmann::json list = nlohmann::json::array();
  for (const plan::PlanKnobs& k : plans) {
    nlohmann::json flags = nlohmann::json::object();
    for (const auto& [name, value] : k.flags()) flags[name] = value;
    list.push_back(flags);
  }
  return list;
}

// What rank 0 sent, checked before it is trained: a list of plans' flags
// (none: the trial is over).
std::vector<plan::PlanKnobs> plans_from_wire(const std::vector<std::byte>& msg) {
  const std::string text(reinterpret_cast<const char*>(msg.data()), msg.size());
  const nlohmann::json list = nlohmann::json::parse(text, nullptr, false);
  SPARQ_CHECK_AS(WireError, !list.is_discarded() && list.is_array(),
                 "--trial: rank 0's plans are not a JSON list of plans ({} bytes)", msg.size());
  std::vector<plan::PlanKnobs> plans;
  for (const nlohmann::json& flags : list) {
    SPARQ_CHECK_AS(WireError, flags.is_object(), "--trial: a plan from rank 0 is not an object of flags");
    plan::Flags f;
    for (const auto& [name, value] : flags.items()) {
      SPARQ_CHECK_AS(WireError, value.is_string(), "--trial: rank 0's flag --{} is not a string", name);
      f.emplace_back(name, value.get<std::string>());
    }
    plans.push_back(plan::knobs_from_flags(f));
  }
  return plans;
}

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

}  // namespace

std::vector<plan::PlanKnobs> share_plans(Transport& t, const std::vector<plan::PlanKnobs>& plans,
                                         double max_wait_s) {
  if (t.rank() == 0) {
    const std::string text = plans_json(plans).dump();
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
  return plans_from_wire(req.take_message());
}

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

}  // namespace sparq::cli
