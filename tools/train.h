#pragma once
// `sparq train`: flags (train_flags.cc) -> options (train_options.cc) ->
// data (train_data.cc) -> a plan per rank and the library's trainer.
#include "tools/train_args.h"

namespace sparq::cli {

void run_train(const TrainArgs& a);

}  // namespace sparq::cli
