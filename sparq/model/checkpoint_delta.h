#pragma once
// Internal to sparq_model: load_checkpoint()'s step for each delta of a chain.
#include <cstddef>
#include <string>
#include <vector>

#include "sparq/model/dlrm.h"
#include "sparq/model/optimizer.h"

namespace sparq::ckpt {

// Applies the delta at `path` to a model (and optimizer, unless null) that
// holds the point it follows; fills `rank_states` (unless null) with its
// codec states. Returns its metadata.
std::string apply_delta(const std::string& path, Dlrm<float>& model, Optimizer<float>* opt,
                        std::vector<std::vector<std::byte>>* rank_states);

}  // namespace sparq::ckpt
