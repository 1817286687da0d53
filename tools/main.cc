// sparq: communication-efficient distributed training of recommendation models.
#include <fmt/format.h>

#include <cstdio>

#include "sparq/core/error.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"sparq: communication-efficient distributed training of recommendation models"};
  app.require_subcommand(1);
  sparq::cli::Run run;
  sparq::cli::add_bench(app, run);
  sparq::cli::add_gen_data(app, run);
  sparq::cli::add_convert(app, run);
  sparq::cli::add_train(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    run();
  } catch (const std::exception& e) {
    fmt::print(stderr, "sparq: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
