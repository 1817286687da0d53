#pragma once
// Helpers shared by `sparq gen-data` and `sparq train --data-generation
// synthetic`: flags -> generator options, and the teacher's scores.
#include <fmt/format.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sparq/core/error.h"
#include "sparq/data/synthetic.h"
#include "sparq/model/dlrm.h"

namespace sparq::cli {

inline std::vector<std::size_t> per_table(const std::string& s, const char* flag) {
  auto v = parse_dash_list(s);
  if (v.size() == 1) v.assign(kCriteoSparse, v[0]);
  SPARQ_CHECK_AS(InputError, v.size() == kCriteoSparse, "{} needs one value or {} (Criteo has {} categorical features), got {}",
                 flag, kCriteoSparse, kCriteoSparse, v.size());
  return v;
}

inline SyntheticOptions synthetic_options(std::uint64_t seed, double zipf, const std::string& cardinalities) {
  SyntheticOptions so;
  so.seed = seed;
  so.zipf_exponent = zipf;
  if (!cardinalities.empty()) so.cardinalities = per_table(cardinalities, "--cardinalities");
  return so;
}

}  // namespace sparq::cli
