#include "sparq/plan/search.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>

namespace sparq::plan {

std::vector<const Candidate*> leaders(std::vector<const Candidate*> runs, double within, std::size_t max) {
  std::stable_sort(runs.begin(), runs.end(),
                   [](const Candidate* a, const Candidate* b) { return a->run->ms_per_step < b->run->ms_per_step; });
  if (runs.empty()) return {};
  const double limit = runs.front()->run->ms_per_step * (1 + within);
  const auto window_end =
      std::find_if(runs.begin(), runs.end(), [&](const Candidate* c) { return c->run->ms_per_step > limit; });
  // The fastest of each family (structure and placement) first, then the
  // fastest of the rest: the refining runs turn knobs the first runs held
  // fixed (threads a rank), and those pay more in some families than in
  // others. At 8 ranks on 10 Gbit/s table-wise plans 7-8 % behind four
  // replicated ones on one thread were faster on two (the replicated plan
  // chosen took 1.078 of a table-wise one's step), and the three fastest of
  // the window were all replicated.
  std::vector<const Candidate*> chosen;
  std::set<std::string> families;
  for (auto l = runs.begin(); l != window_end; ++l)
    if (chosen.size() < max && families.insert((*l)->knobs.structure() + " " + (*l)->knobs.placement).second)
      chosen.push_back(*l);
  for (auto l = runs.begin(); l != window_end; ++l)
    if (chosen.size() < max && std::find(chosen.begin(), chosen.end(), *l) == chosen.end()) chosen.push_back(*l);
  // And the fastest fp32 plan, so that the speed-up is of two runs alike.
  const auto fp32 = std::find_if(runs.begin(), runs.end(), [](const Candidate* c) { return c->knobs.fp32(); });
  if (fp32 != runs.end() && std::find(chosen.begin(), chosen.end(), *fp32) == chosen.end()) chosen.push_back(*fp32);
  return chosen;
}

namespace {

void refine_leaders(std::vector<Candidate>& all, const SearchOptions& o) {
  std::vector<const Candidate*> runs;
  for (const Candidate& c : all)
    if (c.run && c.verdict.admitted) runs.push_back(&c);
  const std::vector<const Candidate*> chosen = leaders(runs, o.refine_within, o.refine_max);
  std::vector<Candidate> refined;
  std::set<std::string> tried;  // two leaders may share a variant
  for (const Candidate* l : chosen)
    for (const PlanKnobs& k : o.variants ? o.variants(l->knobs) : std::vector{l->knobs}) {
      PlanKnobs as_planned = k;
      as_planned.threads = l->knobs.threads;
      const auto plan = std::find_if(all.begin(), all.end(), [&](const Candidate& c) { return c.knobs == as_planned; });
      const Candidate& own = plan == all.end() ? *l : *plan;
      if (own.verdict.admitted && tried.insert(k.label()).second)
        refined.push_back({k, own.verdict, own.bound_ms, o.refine(k), "", true, {}, 0});
    }
  all.insert(all.end(), refined.begin(), refined.end());
}

}  // namespace

std::vector<Candidate> search(std::vector<Candidate> all, const std::function<Measured(const PlanKnobs&)>& run,
                              const SearchOptions& o) {
  // The fp32 plans first (every speed-up is against the fastest of them),
  // then the data-parallel plans (fast ones set the pace the others' bounds
  // are held to), each by bound.
  std::stable_sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
    if (a.knobs.fp32() != b.knobs.fp32()) return a.knobs.fp32();
    const bool dp_a = a.knobs.structure() == "dp", dp_b = b.knobs.structure() == "dp";
    return dp_a != dp_b ? dp_a : a.bound_ms < b.bound_ms;
  });
  double best = std::numeric_limits<double>::infinity();
  std::map<std::string, double> least_compute;  // data parallel's, by MLP precision: bf16 computes less
  for (Candidate& c : all) {
    if (!c.verdict.admitted) {
      c.skipped = "accuracy: " + c.verdict.why;
      continue;
    }
    if (!o.exhaustive && !o.judge_run && o.deferred && o.deferred(c.knobs)) {
      c.skipped = "a leader's variant: run only where the plan without it leads";
      continue;
    }
    const bool may_skip = !o.exhaustive && !c.knobs.fp32();
    double floor = 0;
    if (c.knobs.structure() != "dp") {
      // The floor costs a run of its own: only where it may save one.
      if (o.structure_floor && may_skip) floor = o.compute_floor * o.structure_floor(c.knobs);
    } else if (const auto least = least_compute.find(c.knobs.mlp); least != least_compute.end()) {
      floor = o.compute_floor * least->second;
    }
    const double bound = std::max(c.bound_ms, floor);
    if (may_skip && bound >= best) {
      c.skipped = fmt::format("cannot win: at least {:.2f} ms a step, the fastest run took {:.2f}", bound, best);
      continue;
    }
    c.run = run(c.knobs);
    if (o.judge_run) c.verdict = o.judge_run(c.knobs, *c.run);
    if (c.verdict.admitted) best = std::min(best, c.run->ms_per_step);
    if (c.run->compute_ms > 0 && c.knobs.structure() == "dp") {
      double& least = least_compute.try_emplace(c.knobs.mlp, c.run->compute_ms).first->second;
      least = std::min(least, c.run->compute_ms);
    }
  }
  if (o.refine) {
    if (o.before_refine) o.before_refine();
    refine_leaders(all, o);
  }
  std::stable_sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
    if (a.run.has_value() != b.run.has_value()) return a.run.has_value();
    if (a.refined != b.refined) return a.refined;
    return a.run && a.run->ms_per_step < b.run->ms_per_step;
  });
  return all;
}

namespace {

// Each admitted plan run that `keep` takes, by its first run (a longer run
// where it has no first one), in label order.
std::vector<const Candidate*> by_first_run(const std::vector<Candidate>& all,
                                           const std::function<bool(const PlanKnobs&)>& keep) {
  std::map<std::string, const Candidate*> by_label;
  for (const bool refined : {false, true})
    for (const Candidate& c : all)
      if (c.run && c.verdict.admitted && c.refined == refined && keep(c.knobs))
        by_label.try_emplace(c.knobs.label(), &c);
  std::vector<const Candidate*> runs;
  for (const auto& [label, c] : by_label) runs.push_back(c);
  return runs;
}

}  // namespace

std::vector<const Candidate*> trial_set(const std::vector<Candidate>& all, double within, std::size_t max) {
  return leaders(by_first_run(all, [](const PlanKnobs&) { return true; }), within, max);
}

std::vector<const Candidate*> fusion_variants(const std::vector<Candidate>& all, const PlanKnobs& k) {
  std::vector<const Candidate*> out = by_first_run(all, [&](const PlanKnobs& x) {
    PlanKnobs same_fusion = x;
    same_fusion.fuse = k.fuse;
    return same_fusion == k;
  });
  std::stable_partition(out.begin(), out.end(), [&](const Candidate* c) { return c->knobs == k; });
  return out;
}

const Candidate* fastest(const std::vector<Candidate>& c, bool fp32_only) {
  const bool refined = std::any_of(c.begin(), c.end(), [&](const Candidate& x) {
    return x.refined && x.run && x.verdict.admitted && (!fp32_only || x.knobs.fp32());
  });
  const Candidate* best = nullptr;
  for (const Candidate& x : c)
    if (x.run && x.verdict.admitted && x.refined == refined && (!fp32_only || x.knobs.fp32()) &&
        (!best || x.run->ms_per_step < best->run->ms_per_step))
      best = &x;
  return best;
}

}  // namespace sparq::plan
