#pragma once
// The search of `sparq plan`: every plan of the space is judged for accuracy
// (evidence.h), bounded (bounds.h), and the admitted ones are run on the
// virtual clock in the order of their bounds; a plan whose bound is slower
// than the fastest plan run so far is skipped (it cannot win), unless the
// search is exhaustive. The caller supplies the run.
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sparq/plan/evidence.h"
#include "sparq/plan/space.h"

namespace sparq::plan {

struct Measured {
  double ms_per_step = 0;                      // modelled, the median of the timed steps
  double compute_ms = 0;                       // of it, forward + backward + optimizer on rank 0's training thread
  std::map<std::string, double> bytes_per_step;  // rank 0's, by entity (W_grad, emb_fwd, ...)
  std::optional<double> test_loss;             // after the run (a pilot)
};

struct Candidate {
  PlanKnobs knobs;
  Verdict verdict;
  double bound_ms = 0;          // bytes_bound x the network's time a byte, and the compute floor
  std::optional<Measured> run;  // absent: not run (see skipped)
  std::string skipped;          // why it was not run
  bool refined = false;         // a leader's longer run (SearchOptions::refine)
  std::vector<double> on_hosts;  // `sparq plan --trial`: its ms/step on the hosts, round by round
  double on_hosts_relative = 0;  // and against its stage's median plan, the median of the rounds' ratios
};

struct SearchOptions {
  bool exhaustive = false;  // run every admitted plan
  // With pilots: a run plan's verdict from its run (the fp32 plans run
  // first); a plan it leaves out does not count as the fastest.
  std::function<Verdict(const PlanKnobs&, const Measured&)> judge_run;
  // A data-parallel plan's computation is at least this fraction of the
  // least any run data-parallel plan of the same MLP precision took (codecs
  // add work; a plan never removes the MLPs').
  double compute_floor = 0.9;
  // A hybrid or server plan's step is at least compute_floor times this: the
  // step of its structure (MLP precision, placement, stages, servers) with
  // no codec on an infinitely fast network (codecs add work, a network only
  // time). Its computation cannot be told from data parallel's: a hybrid
  // stage updates half the MLPs, its pipeline idles in its bubble.
  std::function<double(const PlanKnobs&)> structure_floor;
  // The leaders (the admitted plans within refine_within of the fastest, at
  // most refine_max, the fastest of each structure and placement first) run
  // again by refine(), longer, once for each of variants(k) (k itself and,
  // e.g., other thread counts), and so does the fastest fp32 plan; the
  // choices are then among these runs: a short run's luck does not decide
  // them.
  // A variant that is a plan of the space (at the leader's thread count)
  // runs only if admitted, with that plan's own verdict.
  std::function<Measured(const PlanKnobs&)> refine;
  // Called once before the longer runs (the planner fixes its kernel costs
  // anew there, from the first pass's calls: KernelCosts::refit).
  std::function<void()> before_refine;
  std::function<std::vector<PlanKnobs>(const PlanKnobs&)> variants;
  // Plans the first pass leaves to the leaders' variants (unless the search
  // is exhaustive or pilots judge the plans): a knob that moves a step by a
  // few per cent and would double the plans run is tried only on the plans
  // that lead without it.
  std::function<bool(const PlanKnobs&)> deferred;
  double refine_within = 0.1;
  std::size_t refine_max = 3;
};

// `run(k)`: a run of the plan on the virtual clock; each candidate carries its own bound.
// Returns every candidate, the ones run first, fastest first.
std::vector<Candidate> search(std::vector<Candidate> all, const std::function<Measured(const PlanKnobs&)>& run,
                              const SearchOptions& o);

// The leaders of `runs` (run and admitted): those within `within` of the
// fastest, at most `max`, the fastest of each family (structure and
// placement) first; then the fastest fp32 plan among `runs`, beyond `max`.
std::vector<const Candidate*> leaders(std::vector<const Candidate*> runs, double within, std::size_t max);

// The plans `sparq plan --trial` trains on the hosts: the leaders of the
// admitted plans run, each plan by its first run (all made in one pass, so
// comparable), a leader's runs at other thread counts by their longer run.
std::vector<const Candidate*> trial_set(const std::vector<Candidate>& all, double within, std::size_t max);

// `k` and the admitted plans the clock ran that differ from it in fusion
// alone, each by its first run: what `sparq plan --trial` tries next on the
// hosts (the clock's fusion charge is the one it least agrees with them on).
std::vector<const Candidate*> fusion_variants(const std::vector<Candidate>& all, const PlanKnobs& k);

// The fastest admitted candidate run (nullptr when none), among the refined
// runs where there are any; `fp32_only`: of the plans without a codec (what
// every speed-up is against).
const Candidate* fastest(const std::vector<Candidate>& c, bool fp32_only = false);

}  // namespace sparq::plan
