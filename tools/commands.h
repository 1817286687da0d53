#pragma once
// Subcommands of the `sparq` CLI. Each add_* registers its subcommand(s) on
// the app and sets `run` to the work to do when that subcommand is chosen;
// main() parses, then calls `run` and turns any exception into one line on
// stderr and exit code 1.
#include <CLI/CLI.hpp>

#include <functional>
#include <optional>
#include <string>

#include "sparq/train/pipeline.h"

namespace sparq::cli {

using Run = std::function<void()>;

// A count that must be >= 1. CLI11's PositiveNumber states its range as
// "0.000000 to 179769313486231570814527423731704356798..."; this says what
// is wrong in words.
inline const CLI::Validator kPositive(
    [](std::string& s) -> std::string {
      double v = 0;
      return CLI::detail::lexical_cast(s, v) && v > 0 ? std::string() : "must be a positive number, got " + s;
    },
    "POSITIVE");

void add_bench(CLI::App& app, Run& run);
// `bench sparse-allreduce`, registered by add_bench under `bench`.
void add_bench_sparse(CLI::App& bench, Run& run);
// `bench quantized-allreduce` and `bench quantized-alltoall`.
void add_bench_quantized(CLI::App& bench, Run& run);
void add_gen_data(CLI::App& app, Run& run);
void add_convert(CLI::App& app, Run& run);
void add_train(CLI::App& app, Run& run);
void add_report(CLI::App& app, Run& run);
void add_predict(CLI::App& app, Run& run);
void add_export(CLI::App& app, Run& run);
void add_linear(CLI::App& app, Run& run);
void add_plan(CLI::App& app, Run& run);
void add_launch(CLI::App& app, Run& run);

// The cuts of a model trained with a cut codec that changes the forward pass
// (dct, sketch), from its checkpoint's metadata; nothing for any other model.
struct TrainedCuts {
  std::string splits;
  MpCodec codec;
};
std::optional<TrainedCuts> forward_cuts(const std::string& meta, const std::string& path);

}  // namespace sparq::cli
