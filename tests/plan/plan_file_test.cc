#include "sparq/plan/plan_file.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "sparq/core/error.h"

namespace sparq::plan {

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("sparq_plan_test_" + name)).string();
}

PlanFile example() {
  return {{"table-wise", "dct:0.98,1000", "auto", "q4", "q2", "1MiB", 2},
          "bot 13-512-256-64-16, top 367-512-256-1, 26 tables x 16, rows 100000",
          4, 2048, "1gbit,50us", 13.5, 38.7, "stored runs", "0.1.0"};
}

std::string error_of(const std::string& path) {
  try {
    read_plan_file(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

void rewrite(const std::string& path, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j;
  std::ifstream(path) >> j;
  edit(j);
  std::ofstream(path) << j.dump();
}

}  // namespace

TEST(PlanFile, WhatIsWrittenIsRead) {
  const std::string path = temp_path("roundtrip.json");
  write_plan_file(path, example());
  const PlanFile p = read_plan_file(path);
  const PlanFile e = example();
  EXPECT_EQ(p.knobs, e.knobs);
  EXPECT_EQ(p.model, e.model);
  EXPECT_EQ(p.ranks, e.ranks);
  EXPECT_EQ(p.global_batch, e.global_batch);
  EXPECT_EQ(p.net, e.net);
  EXPECT_DOUBLE_EQ(p.modelled_ms, e.modelled_ms);
  EXPECT_DOUBLE_EQ(p.fp32_ms, e.fp32_ms);
  EXPECT_EQ(p.evidence, e.evidence);
  EXPECT_EQ(p.version, e.version);
  EXPECT_EQ(p.measured_ms, 0);  // not measured: absent from the file
  PlanFile trialled = example();
  trialled.measured_ms = 12.25;  // sparq plan --trial: the step its hosts measured
  write_plan_file(path, trialled);
  EXPECT_DOUBLE_EQ(read_plan_file(path).measured_ms, 12.25);
  rewrite(path, [](nlohmann::json& j) { j["measured_ms_per_step"] = -1; });
  EXPECT_NE(error_of(path).find("\"measured_ms_per_step\" must be > 0"), std::string::npos) << error_of(path);
  rewrite(path, [](nlohmann::json& j) { j["measured_ms_per_step"] = "fast"; });
  EXPECT_NE(error_of(path).find("measured_ms_per_step"), std::string::npos) << error_of(path);
  std::filesystem::remove(path);
}

TEST(PlanFile, BadFilesAreRefusedNamingWhatIsWrong) {
  const std::string path = temp_path("bad.json");
  std::ofstream(path) << "not json";
  EXPECT_NE(error_of(path).find("not a JSON object"), std::string::npos) << error_of(path);
  write_plan_file(path, example());
  rewrite(path, [](nlohmann::json& j) { j["format_version"] = 99; });
  EXPECT_NE(error_of(path).find("plan format 99"), std::string::npos) << error_of(path);
  write_plan_file(path, example());
  rewrite(path, [](nlohmann::json& j) { j.erase("ranks"); });
  EXPECT_NE(error_of(path).find("no \"ranks\""), std::string::npos) << error_of(path);
  write_plan_file(path, example());
  rewrite(path, [](nlohmann::json& j) { j["flags"]["seed"] = "2"; });
  EXPECT_NE(error_of(path).find("--seed is not a flag a plan sets"), std::string::npos) << error_of(path);
  write_plan_file(path, example());
  rewrite(path, [](nlohmann::json& j) { j["ranks"] = "four"; });
  EXPECT_NE(error_of(path).find("\"ranks\" has the wrong type"), std::string::npos) << error_of(path);
  EXPECT_NE(error_of(temp_path("missing.json")).find("cannot read the plan"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(PlanFile, PlansGoOverTheWireAsTheirFlagsAndWhatArrivesIsChecked) {
  PlanKnobs hybrid;
  hybrid.mp_splits = "bot:2", hybrid.micro_batches = 2, hybrid.dp_codec = "dct:0.95,1000";
  const std::vector<PlanKnobs> plans{example().knobs, hybrid};
  EXPECT_EQ(plans_from_text(plans_text(plans), "here"), plans);
  EXPECT_TRUE(plans_from_text(plans_text({}), "here").empty());  // the end of a trial
  auto error = [](const std::string& text) {
    try {
      plans_from_text(text, "rank 0's plans");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error("[{\"dp-codec\": \"q4\"").find("rank 0's plans: not a JSON list of plans"), std::string::npos);
  EXPECT_NE(error("{}").find("not a JSON list of plans"), std::string::npos);
  EXPECT_NE(error("[3]").find("rank 0's plans: the plan's \"flags\" is not an object"), std::string::npos);
  EXPECT_NE(error("[{\"threads\": 2}]").find("flag \"threads\" is not a string"), std::string::npos);
  EXPECT_NE(error("[{\"rm -rf\": \"/\"}]").find("rank 0's plans: "), std::string::npos);
}

}  // namespace sparq::plan
