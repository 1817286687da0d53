#pragma once
// Criteo samples from the DLRM reference's pre-processed .npz
// (facebookresearch/dlrm data_utils.py): arrays
//   X_int  [N x 13] integers, the raw counts (missing -> 0)
//   X_cat  [N x 26] integers, per-feature dictionary indices (>= 0)
//   y      [N]      labels 0/1
// ("counts", the dictionaries' sizes, may be there and is not needed).
// Records get the same transforms as a TSV line (criteo.h): dense =
// log(1 + max(x, 0)); sparse = the index as a 32-bit value, which sparq then
// hashes to a row like any categorical value (hash.h).
#include <string>
#include <vector>

#include "sparq/data/criteo.h"

namespace sparq {

// Throws InputError naming the file and the array: a missing array, a wrong
// shape or type, differing N, a negative or over-32-bit X_cat, a label not 0/1.
std::vector<CriteoRecord> read_criteo_npz(const std::string& path);

}  // namespace sparq
