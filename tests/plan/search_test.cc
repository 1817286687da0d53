#include "sparq/plan/search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

namespace sparq::plan {

namespace {

// A candidate set member by member: g++ 12 warns (falsely, and by how it
// happens to inline) of brace-built ones moved into a vector.
Candidate candidate(const PlanKnobs& k, bool admitted, double bound_ms, const std::string& why = "") {
  Candidate c;
  c.knobs = k, c.verdict.admitted = admitted, c.verdict.why = why, c.bound_ms = bound_ms;
  return c;
}

// The space of 8 ranks with a random step for each plan and a random lower
// bound below it; every tenth plan left out for accuracy.
struct World {
  std::vector<Candidate> all;
  std::map<std::string, double> step;
  int runs = 0;

  explicit World(unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(0, 1);
    int i = 0;
    for (const PlanKnobs& k : plan_space(8)) {
      const double ms = 5 + 50 * u(rng);
      step[k.label()] = ms;
      const bool admitted = k.fp32() || ++i % 10 != 0;
      all.push_back(candidate(k, admitted, ms * u(rng), admitted ? "" : "left out"));
    }
  }
  Measured run(const PlanKnobs& k) {
    ++runs;
    return {step.at(k.label()), 0, {}, {}};
  }
  // The reference: the fastest admitted plan of them all, by brute force.
  std::string fastest_admitted() const {
    std::string best;
    for (const Candidate& c : all)
      if (c.verdict.admitted && (best.empty() || step.at(c.knobs.label()) < step.at(best))) best = c.knobs.label();
    return best;
  }
};

}  // namespace

TEST(PlanSearch, PruningByLowerBoundsFindsTheExhaustiveWinner) {
  for (unsigned seed = 1; seed <= 20; ++seed) {
    World w(seed);
    const std::string expect = w.fastest_admitted();
    const auto got = search(w.all, [&](const PlanKnobs& k) { return w.run(k); }, {});
    ASSERT_NE(fastest(got), nullptr);
    EXPECT_EQ(fastest(got)->knobs.label(), expect) << "seed " << seed;
    EXPECT_LT(w.runs, static_cast<int>(w.all.size()));  // the bounds pruned some
    for (const Candidate& c : got)
      if (!c.run) {
        EXPECT_FALSE(c.skipped.empty()) << c.knobs.label();
      }
  }
}

TEST(PlanSearch, ExhaustiveRunsEveryAdmittedPlanAndSortsThemFastestFirst) {
  World w(7);
  SearchOptions o;
  o.exhaustive = true;
  const auto got = search(w.all, [&](const PlanKnobs& k) { return w.run(k); }, o);
  int admitted = 0;
  for (const Candidate& c : w.all) admitted += c.verdict.admitted;
  EXPECT_EQ(w.runs, admitted);
  for (std::size_t i = 1; i < got.size() && got[i].run; ++i)
    EXPECT_LE(got[i - 1].run->ms_per_step, got[i].run->ms_per_step);
  for (const Candidate& c : got)
    if (!c.verdict.admitted) {
      EXPECT_EQ(c.skipped, "accuracy: left out");
    }
}

TEST(PlanSearch, APlanItsPilotLeavesOutIsNeitherChosenNorABarToOthers) {
  World w(3);
  for (Candidate& c : w.all) c.verdict = {true, 0, ""};
  // The fastest plan of all fails its pilot.
  std::string fastest_label;
  for (const auto& [label, ms] : w.step)
    if (fastest_label.empty() || ms < w.step[fastest_label]) fastest_label = label;
  const std::string fp32_best = [&] {
    std::string b;
    for (const Candidate& c : w.all)
      if (c.knobs.fp32() && (b.empty() || w.step[c.knobs.label()] < w.step[b])) b = c.knobs.label();
    return b;
  }();
  SearchOptions o;
  o.judge_run = [&](const PlanKnobs& k, const Measured&) {
    return Verdict{k.label() != fastest_label, 0, k.label() != fastest_label ? "pilot ok" : "pilot failed"};
  };
  const auto got = search(w.all, [&](const PlanKnobs& k) { return w.run(k); }, o);
  w.all = got;
  for (Candidate& c : w.all)
    if (c.knobs.label() == fastest_label) c.verdict.admitted = false;
  ASSERT_NE(fastest(got), nullptr);
  EXPECT_NE(fastest(got)->knobs.label(), fastest_label);
  EXPECT_EQ(fastest(got)->knobs.label(), w.fastest_admitted());
  EXPECT_EQ(fastest(got, true)->knobs.label(), fp32_best);
}

TEST(PlanSearch, TheLeadersAndTheFastestFp32PlanAreRunAgainAndTheChoiceIsAmongThoseRuns) {
  World w(11);
  // The longer runs see each plan's true step; the short runs are off by
  // up to 10 %, so the short runs' order among the leaders is noise.
  std::map<std::string, double> truth;
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(0.9, 1.1);
  for (auto& [label, ms] : w.step) truth[label] = ms, ms *= u(rng);
  SearchOptions o;
  o.refine_within = 0.5;
  o.refine_max = 1000;  // every leader within 50 %
  std::vector<std::string> refined;
  o.refine = [&](const PlanKnobs& k) {
    refined.push_back(k.label());
    return Measured{truth.at(k.label()), 0, {}, {}};
  };
  const auto got = search(w.all, [&](const PlanKnobs& k) { return w.run(k); }, o);
  const Candidate* best = fastest(got);
  ASSERT_NE(best, nullptr);
  EXPECT_TRUE(best->refined);
  for (const Candidate& c : got)
    if (c.refined) {
      EXPECT_LE(best->run->ms_per_step, c.run->ms_per_step);
    }
  EXPECT_EQ(best->run->ms_per_step, truth.at(best->knobs.label()));
  const Candidate* fp32 = fastest(got, true);
  ASSERT_NE(fp32, nullptr);
  EXPECT_TRUE(fp32->refined && fp32->knobs.fp32());
}

TEST(PlanSearch, BeforeRefineRunsOnceBetweenTheFirstPassAndTheLongerRuns) {
  World w(13);
  std::vector<std::string> calls;
  SearchOptions o;
  o.refine = [&](const PlanKnobs& k) {
    calls.push_back("refine");
    return w.run(k);
  };
  o.before_refine = [&] { calls.push_back("before_refine"); };
  search(w.all, [&](const PlanKnobs& k) {
    calls.push_back("run");
    return w.run(k);
  }, o);
  const auto at = std::find(calls.begin(), calls.end(), "before_refine");
  ASSERT_NE(at, calls.end());
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "before_refine"), 1);
  EXPECT_GT(std::count(calls.begin(), at, "run"), 0);
  EXPECT_EQ(std::count(calls.begin(), at, "refine"), 0);
  EXPECT_EQ(std::count(at, calls.end(), "run"), 0);
  EXPECT_GT(std::count(at, calls.end(), "refine"), 0);
}

TEST(PlanSearch, VariantsOfALeaderRunToo) {
  World w(12);
  SearchOptions o;
  o.refine = [&](const PlanKnobs& k) { return Measured{k.threads == 2 ? 1.0 : 100.0, 0, {}, {}}; };
  o.variants = [](const PlanKnobs& k) {
    PlanKnobs two = k;
    two.threads = 2;
    return std::vector{k, two};
  };
  const auto got = search(w.all, [&](const PlanKnobs& k) { return w.run(k); }, o);
  ASSERT_NE(fastest(got), nullptr);
  EXPECT_EQ(fastest(got)->knobs.threads, 2);
  EXPECT_EQ(fastest(got, true)->knobs.threads, 2);
}

TEST(PlanSearch, Bf16MlpsAreNotBoundedByFp32sComputation) {
  // Two plans with fp32 MLPs compute 10 ms (the codec's hides its exchange:
  // 9 ms a step); a bf16 plan computes 6 ms. Bounded by fp32's computation
  // it could not beat 9 ms (0.9 x 10); bounded by its own it runs and wins.
  PlanKnobs fp32, codec, bf16;
  codec.dp_codec = "q4", bf16.dp_codec = "q4", bf16.mlp = "bf16";
  std::vector<Candidate> all;
  for (const PlanKnobs& k : {fp32, codec, bf16}) all.push_back(candidate(k, true, 0.1));
  const std::map<std::string, Measured> steps = {{fp32.label(), {12, 10, {}, {}}},
                                                  {codec.label(), {9, 10, {}, {}}},
                                                  {bf16.label(), {7, 6, {}, {}}}};
  const auto got = search(all, [&](const PlanKnobs& k) { return steps.at(k.label()); }, {});
  ASSERT_NE(fastest(got), nullptr);
  EXPECT_EQ(fastest(got)->knobs.mlp, "bf16");
}

TEST(PlanSearch, AHybridPlanIsBoundedByItsStructureOnAnInfinitelyFastNetwork) {
  // Data parallel's 11 ms plan ran first; the hybrid plan's bound of 0
  // bytes sorts it first among the rest, but its structure alone takes 15
  // ms on an infinitely fast network: 0.9 x 15 = 13.5 ms cannot win. With a
  // structure of 5 ms it runs (and data parallel's computation, 10 ms, is
  // no bound on it: a hybrid rank computes one stage).
  PlanKnobs fp32, codec, hybrid;
  codec.dp_codec = "q4", hybrid.dp_codec = "q4", hybrid.mp_splits = "bot:2", hybrid.micro_batches = 2;
  for (const double structure : {15.0, 5.0}) {
    std::vector<Candidate> all;
    all.push_back(candidate(hybrid, true, 0));
    all.push_back(candidate(codec, true, 1));
    all.push_back(candidate(fp32, true, 5));
    std::vector<std::string> ran;
    SearchOptions o;
    o.structure_floor = [&](const PlanKnobs& k) {
      EXPECT_EQ(k.structure(), "hybrid");
      return structure;
    };
    const auto got = search(all, [&](const PlanKnobs& k) {
      ran.push_back(k.label());
      return k == fp32 ? Measured{12, 10, {}, {}} : k == codec ? Measured{11, 10, {}, {}} : Measured{8, 4, {}, {}};
    }, o);
    const auto h = std::find_if(got.begin(), got.end(), [&](const Candidate& c) { return c.knobs == hybrid; });
    ASSERT_NE(h, got.end());
    if (structure == 15) {
      EXPECT_EQ(ran, (std::vector{fp32.label(), codec.label()}));
      EXPECT_NE(h->skipped.find("cannot win: at least 13.50 ms"), std::string::npos) << h->skipped;
    } else {
      EXPECT_EQ(ran.back(), hybrid.label());
      EXPECT_EQ(fastest(got)->knobs, hybrid);
    }
  }
}

TEST(PlanSearch, EachPlacementsFastestLeaderRunsAgain) {
  // Four replicated plans lead the first runs, a table-wise one 8 % behind
  // them (inside the 10 % window); on two threads, which only the refining
  // runs try, the table-wise plan is the fastest. With three leaders taken
  // by speed alone it would never run again.
  std::vector<Candidate> all;
  std::map<std::string, double> first, refined;
  for (const auto& [codec, ms] : std::vector<std::pair<std::string, double>>{
           {"none", 10.0}, {"q4", 10.1}, {"dct:0.98,1000", 10.2}, {"dct:0.95,1000", 10.3}}) {
    PlanKnobs k;
    k.dp_codec = codec;
    all.push_back(candidate(k, true, 0));
    first[k.label()] = ms, refined[k.label()] = ms;
  }
  PlanKnobs table_wise;
  table_wise.placement = "table-wise", table_wise.dp_codec = "q4";
  all.push_back(candidate(table_wise, true, 0));
  first[table_wise.label()] = 10.8, refined[table_wise.label()] = 9.0;
  std::vector<std::string> rerun;
  SearchOptions o;
  o.refine = [&](const PlanKnobs& k) {
    rerun.push_back(k.label());
    return Measured{refined.at(k.label()), 0, {}, {}};
  };
  const auto got = search(all, [&](const PlanKnobs& k) { return Measured{first.at(k.label()), 0, {}, {}}; }, o);
  // The fastest replicated, the table-wise, the next fastest: three (the fp32 plan is among them).
  PlanKnobs replicated_q4;
  replicated_q4.dp_codec = "q4";
  EXPECT_EQ(rerun, (std::vector{PlanKnobs{}.label(), table_wise.label(), replicated_q4.label()}));
  ASSERT_NE(fastest(got), nullptr);
  EXPECT_EQ(fastest(got)->knobs, table_wise);
}

TEST(PlanSearch, ADeferredPlanRunsOnlyAsALeadersVariantWithItsOwnVerdict) {
  // Replicated plans with and without bf16 gradients; the bf16 twin of the
  // fastest plan is left out for accuracy, the twin of the second is faster
  // than anything. Deferred, no twin runs in the first pass, the admitted
  // twin of a leader runs as its variant, the other does not run at all,
  // and neither does the twin of a plan that does not lead.
  auto knobs = [](const std::string& codec, const std::string& grads) {
    PlanKnobs k;
    k.dp_codec = codec, k.emb_bwd = grads;
    return k;
  };
  std::vector<Candidate> all;
  std::map<std::string, double> step;
  for (const auto& [codec, ms] : std::vector<std::pair<std::string, double>>{
           {"q4", 10.0}, {"dct:0.98,1000", 10.5}, {"none", 12.0}, {"dct:0.95,1000", 30.0}}) {
    all.push_back(candidate(knobs(codec, "fp32"), true, 0));
    all.push_back(candidate(knobs(codec, "bf16"), codec != "q4", 0, codec == "q4" ? "left out" : ""));
    step[knobs(codec, "fp32").label()] = ms, step[knobs(codec, "bf16").label()] = 0.9 * ms;
  }
  std::vector<std::string> first, refined;
  SearchOptions o;
  o.refine_within = 0.5;
  o.refine = [&](const PlanKnobs& k) {
    refined.push_back(k.label());
    return Measured{step.at(k.label()), 0, {}, {}};
  };
  o.variants = [](const PlanKnobs& k) {
    PlanKnobs twin = k;
    twin.emb_bwd = "bf16";
    return std::vector{k, twin};
  };
  o.deferred = [](const PlanKnobs& k) { return k.emb_bwd == "bf16"; };
  const auto run = [&](const PlanKnobs& k) {
    first.push_back(k.label());
    return Measured{step.at(k.label()), 0, {}, {}};
  };
  const auto got = search(all, run, o);
  EXPECT_EQ(first, (std::vector{knobs("none", "fp32").label(), knobs("q4", "fp32").label(),
                                knobs("dct:0.98,1000", "fp32").label(), knobs("dct:0.95,1000", "fp32").label()}));
  EXPECT_EQ(refined, (std::vector{knobs("q4", "fp32").label(), knobs("dct:0.98,1000", "fp32").label(),
                                  knobs("dct:0.98,1000", "bf16").label(), knobs("none", "fp32").label(),
                                  knobs("none", "bf16").label()}));
  ASSERT_NE(fastest(got), nullptr);
  EXPECT_EQ(fastest(got)->knobs, knobs("dct:0.98,1000", "bf16"));
  for (const Candidate& c : got)
    if (!c.run && c.knobs == knobs("dct:0.95,1000", "bf16")) {
      EXPECT_EQ(c.skipped, "a leader's variant: run only where the plan without it leads");
    }
  // Exhaustive, every admitted plan runs in the first pass.
  first.clear();
  o.exhaustive = true;
  search(all, run, o);
  EXPECT_EQ(first.size(), 7u);
}

TEST(PlanSearch, TheTrialTakesEachPlanByItsFirstRunAndEachFamilysFastestFirst) {
  // First runs (one pass, comparable) stand for their plans, a longer run
  // only for a thread count that had no first run; a plan left out for
  // accuracy never goes to the hosts, however fast.
  auto knobs = [](const std::string& placement, const std::string& codec, int threads = 1) {
    PlanKnobs k;
    k.placement = placement, k.dp_codec = codec, k.threads = threads;
    return k;
  };
  std::vector<Candidate> all;
  auto add = [&](const PlanKnobs& k, double ms, bool refined = false, bool admitted = true) {
    all.push_back(candidate(k, admitted, 0));
    all.back().run = Measured{ms, 0, {}, {}}, all.back().refined = refined;
  };
  add(knobs("replicated", "none"), 20.0);                  // the fastest fp32 plan: far behind, still tried
  add(knobs("replicated", "q4"), 10.0);                    // the fastest first run...
  add(knobs("replicated", "q4"), 12.0, true);              // ...whose longer run does not replace it
  add(knobs("replicated", "q4", 2), 10.2, true);           // only a longer run: it stands
  add(knobs("replicated", "dct:0.98,1000"), 10.5);
  add(knobs("replicated", "dct:0.95,1000"), 11.0);         // in the window, beyond --trial-plans
  add(knobs("table-wise", "q4"), 11.2);                    // its family's fastest: before the replicated ones
  add(knobs("replicated", "dct:0.98,1000+bf16"), 11.6);    // outside 15 %
  add(knobs("replicated", "dct:0.98,1000+fp8"), 9.0, false, false);  // left out for accuracy
  std::vector<std::string> got;
  for (const Candidate* c : trial_set(all, 0.15, 4))
    got.push_back(c->knobs.label() + (c->refined ? " (longer run)" : ""));
  EXPECT_EQ(got, (std::vector<std::string>{knobs("replicated", "q4").label(), knobs("table-wise", "q4").label(),
                                           knobs("replicated", "q4", 2).label() + " (longer run)",
                                           knobs("replicated", "dct:0.98,1000").label(),
                                           knobs("replicated", "none").label()}));
}

TEST(PlanSearch, TheFusionVariantsAreThePlanAtEachOtherFusionSizeTheClockRan) {
  auto knobs = [](const std::string& fuse, const std::string& placement = "replicated", int threads = 1) {
    PlanKnobs k;
    k.dp_codec = "q4", k.fuse = fuse, k.placement = placement, k.threads = threads;
    return k;
  };
  std::vector<Candidate> all;
  auto add = [&](const PlanKnobs& k, bool refined = false, bool run = true) {
    all.push_back(candidate(k, true, 0));
    if (run) all.back().run = Measured{10, 0, {}, {}};
    all.back().refined = refined;
  };
  add(knobs("4MiB"));
  add(knobs("1MiB"), true);                 // the plan's longer run...
  add(knobs("1MiB"));                       // ...its first run stands for it
  add(knobs("0"), true);                    // only a longer run: it stands
  add(knobs("4MiB", "table-wise"));         // another placement
  add(knobs("4MiB", "replicated", 2), true);  // another thread count
  add(knobs("16MiB"), false, false);        // not run on the clock
  std::vector<std::string> got;
  for (const Candidate* c : fusion_variants(all, knobs("1MiB")))
    got.push_back(c->knobs.label() + (c->refined ? " (longer run)" : ""));
  EXPECT_EQ(got, (std::vector<std::string>{knobs("1MiB").label(), knobs("0").label() + " (longer run)",
                                           knobs("4MiB").label()}));
}

}  // namespace sparq::plan
