#pragma once
// The flag groups `sparq train` and `sparq plan` share (train_flags.cc).
#include <CLI/CLI.hpp>

#include <string>
#include <utility>
#include <vector>

#include "tools/train_args.h"

namespace sparq::cli {

// The model, its batch and its optimizers.
void add_model_flags(CLI::App* c, TrainArgs& a);
// Where the samples come from, and how they are read.
void add_data_flags(CLI::App* c, TrainArgs& a);
// Every option of `c` by its long name with its value, as given or by
// default (the first line of --metrics).
std::vector<std::pair<std::string, std::string>> flag_values(const CLI::App& c);

}  // namespace sparq::cli
