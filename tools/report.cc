// `sparq report METRICS... --out DIR`: PNG plots of `sparq train --metrics`
// files, one curve per run (test loss, AUC, NE, training loss, traffic).
//
// The work, checking the files included, is scripts/report.py's: one parser
// of the metrics lines, and the script alone does the same as this command.
// This subcommand finds the script and Debian's python3 and hands over by
// exec, so the script's exit code and one-line errors are the command's.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "sparq/core/error.h"
#include "tools/commands.h"

namespace sparq::cli {

namespace {

// Debian's python3, which has python3-matplotlib: a python3 earlier on PATH
// (a pyenv) would not.
constexpr const char* kPython = "/usr/bin/python3";

void run_report(const std::vector<std::string>& metrics, const std::string& out) {
  SPARQ_CHECK_AS(InputError, access(kPython, X_OK) == 0,
                 "sparq report needs {} with matplotlib (Debian's python3-matplotlib; scripts/setup installs it)",
                 kPython);
  SPARQ_CHECK_AS(InputError, access(SPARQ_REPORT_SCRIPT, R_OK) == 0,
                 "the plotting script {} is missing (is this sparq's source tree still there?)", SPARQ_REPORT_SCRIPT);
  std::vector<std::string> args = {kPython, SPARQ_REPORT_SCRIPT, "--out", out, "--"};
  args.insert(args.end(), metrics.begin(), metrics.end());
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  execv(kPython, argv.data());
  SPARQ_THROW(Error, "cannot run {}: {}", kPython, std::strerror(errno));
}

}  // namespace

void add_report(CLI::App& app, Run& run) {
  auto metrics = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  auto* c = app.add_subcommand("report", "PNG plots of `train --metrics` files, one curve per run");
  c->add_option("metrics", *metrics, "--metrics files of sparq train (each starts with its config line)")->required();
  c->add_option("--out", *out, "Directory for the PNGs (created)")->required();
  c->callback([metrics, out, &run] { run = [metrics, out] { run_report(*metrics, *out); }; });
}

}  // namespace sparq::cli
