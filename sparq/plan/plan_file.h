#pragma once
// The plan `sparq plan` chose, as a JSON file `sparq train --plan FILE`
// reads: the flags of the plan, what it was chosen for (the model, the
// ranks, the global batch, the network) and what it is expected to do (the
// modelled step, the accuracy evidence). A file from another model, another
// format or a sparq that cannot read it is refused, naming the field.
#include <string>
#include <vector>

#include "sparq/plan/space.h"

namespace sparq::plan {

inline constexpr int kPlanFormat = 1;

struct PlanFile {
  PlanKnobs knobs;
  std::string model;       // DlrmConfig::describe() plus the tables' rows
  int ranks = 1;
  std::size_t global_batch = 0;
  std::string net;         // NetModel::describe()
  double modelled_ms = 0;  // the plan's modelled step
  double fp32_ms = 0;      // the fastest fp32 plan's
  std::string evidence;    // what backs its accuracy
  std::string version;     // the sparq that chose it
  double measured_ms = 0;  // its step measured on the hosts (sparq plan --trial; 0: not measured)
};

void write_plan_file(const std::string& path, const PlanFile& p);
// Plans as the JSON text `sparq plan --trial` sends its hosts (a list of
// their flags), and back; what arrives is checked: an error starts with
// `where` and names what is wrong.
std::string plans_text(const std::vector<PlanKnobs>& plans);
std::vector<PlanKnobs> plans_from_text(const std::string& text, const std::string& where);
// Throws InputError with the path and the field that is missing or wrong.
PlanFile read_plan_file(const std::string& path);

}  // namespace sparq::plan
