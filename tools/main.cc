// sparq: communication-efficient distributed training of recommendation models.
#include <fmt/format.h>
#include <malloc.h>

#include <cstdio>

#include "sparq/core/error.h"
#include "sparq/model/blas.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  // Collectives and training steps allocate buffers of megabytes per call.
  // glibc serves those by mmap and returns them on free, so every call
  // faulted its pages in again: half the CPU time of a 16M-element sparse
  // allreduce. Keeping freed memory in the heap makes it 2-3x faster
  // (docs/results.md, "Time on a shaped cluster"). Setting both thresholds also
  // turns off glibc's adaptive threshold; 256 MiB bounds what a free keeps.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  sparq::ensure_best_blas_core(argv);  // may re-execute this program
  CLI::App app{"sparq: communication-efficient distributed training of recommendation models"};
  app.require_subcommand(1);
  sparq::cli::Run run;
  sparq::cli::add_bench(app, run);
  sparq::cli::add_gen_data(app, run);
  sparq::cli::add_convert(app, run);
  sparq::cli::add_train(app, run);
  sparq::cli::add_report(app, run);
  sparq::cli::add_predict(app, run);
  sparq::cli::add_export(app, run);
  sparq::cli::add_linear(app, run);
  sparq::cli::add_plan(app, run);
  sparq::cli::add_launch(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {  // one line, like every other error
    fmt::print(stderr, "sparq: error: {} (see --help)\n", e.what());
    return e.get_exit_code();
  }
  try {
    run();
  } catch (const std::exception& e) {
    fmt::print(stderr, "sparq: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
