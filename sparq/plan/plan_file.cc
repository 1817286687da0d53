#include "sparq/plan/plan_file.h"

#include <nlohmann/json.hpp>

#include <fstream>

#include "sparq/core/error.h"

namespace sparq::plan {

namespace {

template <class T>
T field(const nlohmann::json& j, const char* name, const std::string& path) {
  SPARQ_CHECK_AS(InputError, j.contains(name), "{}: not a plan of sparq plan: no \"{}\"", path, name);
  try {
    return j.at(name).get<T>();
  } catch (const nlohmann::json::exception&) {
    SPARQ_THROW(InputError, "{}: the plan's \"{}\" has the wrong type", path, name);
  }
}

nlohmann::json flags_json(const PlanKnobs& k) {
  nlohmann::json flags = nlohmann::json::object();
  for (const auto& [name, value] : k.flags()) flags[name] = value;
  return flags;
}

// A plan's "flags" object, checked; `where` starts each error.
PlanKnobs knobs_of(const nlohmann::json& given, const std::string& where) {
  SPARQ_CHECK_AS(InputError, given.is_object(), "{}: the plan's \"flags\" is not an object", where);
  Flags flags;
  for (const auto& [name, value] : given.items()) {
    SPARQ_CHECK_AS(InputError, value.is_string(), "{}: the plan's flag \"{}\" is not a string", where, name);
    flags.emplace_back(name, value.get<std::string>());
  }
  try {
    return knobs_from_flags(flags);
  } catch (const InputError& e) {
    SPARQ_THROW(InputError, "{}: {}", where, e.what());
  }
}

}  // namespace

void write_plan_file(const std::string& path, const PlanFile& p) {
  nlohmann::json j = {{"format", "sparq-plan"},       {"format_version", kPlanFormat},
                      {"sparq_version", p.version},   {"model", p.model},
                      {"ranks", p.ranks},             {"global_batch", p.global_batch},
                      {"net", p.net},                 {"flags", flags_json(p.knobs)},
                      {"modelled_ms_per_step", p.modelled_ms}, {"fp32_ms_per_step", p.fp32_ms},
                      {"evidence", p.evidence}};
  if (p.measured_ms > 0) j["measured_ms_per_step"] = p.measured_ms;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    SPARQ_CHECK_AS(InputError, f.good(), "{}: cannot write the plan", path);
    f << j.dump(2) << '\n';
    SPARQ_CHECK_AS(InputError, f.good(), "{}: cannot write the plan", path);
  }
  SPARQ_CHECK_AS(InputError, std::rename(tmp.c_str(), path.c_str()) == 0, "{}: cannot write the plan", path);
}

std::string plans_text(const std::vector<PlanKnobs>& plans) {
  nlohmann::json list = nlohmann::json::array();
  for (const PlanKnobs& k : plans) list.push_back(flags_json(k));
  return list.dump();
}

std::vector<PlanKnobs> plans_from_text(const std::string& text, const std::string& where) {
  const nlohmann::json list = nlohmann::json::parse(text, nullptr, false);
  SPARQ_CHECK_AS(InputError, !list.is_discarded() && list.is_array(), "{}: not a JSON list of plans ({} bytes)", where,
                 text.size());
  std::vector<PlanKnobs> plans;
  for (const nlohmann::json& flags : list) plans.push_back(knobs_of(flags, where));
  return plans;
}

PlanFile read_plan_file(const std::string& path) {
  std::ifstream f(path);
  SPARQ_CHECK_AS(InputError, f.good(), "{}: cannot read the plan", path);
  const nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  SPARQ_CHECK_AS(InputError, !j.is_discarded() && j.is_object(), "{}: not a JSON object (a plan of sparq plan)", path);
  SPARQ_CHECK_AS(InputError, field<std::string>(j, "format", path) == "sparq-plan", "{}: not a plan of sparq plan",
                 path);
  const int version = field<int>(j, "format_version", path);
  SPARQ_CHECK_AS(InputError, version == kPlanFormat,
                 "{}: plan format {} (written by sparq {}); this sparq reads format {}: run sparq plan again", path,
                 version, j.value("sparq_version", "?"), kPlanFormat);
  PlanFile p;
  p.knobs = knobs_of(field<nlohmann::json>(j, "flags", path), path);
  p.model = field<std::string>(j, "model", path);
  p.ranks = field<int>(j, "ranks", path);
  p.global_batch = field<std::size_t>(j, "global_batch", path);
  p.net = field<std::string>(j, "net", path);
  p.modelled_ms = field<double>(j, "modelled_ms_per_step", path);
  p.fp32_ms = field<double>(j, "fp32_ms_per_step", path);
  p.evidence = field<std::string>(j, "evidence", path);
  p.version = field<std::string>(j, "sparq_version", path);
  if (j.contains("measured_ms_per_step")) {
    p.measured_ms = field<double>(j, "measured_ms_per_step", path);
    SPARQ_CHECK_AS(InputError, p.measured_ms > 0, "{}: the plan's \"measured_ms_per_step\" must be > 0", path);
  }
  return p;
}

}  // namespace sparq::plan
