// `sparq convert`: Criteo TSV -> sparq binary (memory-mapped on reload).
#include <fmt/format.h>

#include <chrono>

#include "sparq/core/error.h"
#include "sparq/data/binary_format.h"
#include "sparq/data/tsv_stream.h"
#include "tools/commands.h"

namespace sparq::cli {

namespace {

struct ConvertArgs {
  std::vector<std::string> inputs;
  std::string out;
  bool skip_bad_lines = false;
};

void run_convert(const ConvertArgs& a) {
  const auto t0 = std::chrono::steady_clock::now();
  TsvOptions o;
  o.skip_bad_lines = a.skip_bad_lines;
  TsvStream in(a.inputs, o);
  BinaryWriter out(a.out);
  std::vector<CriteoRecord> buf;
  buf.reserve(1 << 14);
  CriteoRecord r;
  while (in.next(r)) {
    buf.push_back(r);
    if (buf.size() == buf.capacity()) {
      out.write(buf);
      buf.clear();
    }
  }
  out.write(buf);
  out.close(in.bad_lines());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("converted {} records ({} lines) to {} in {:.2f} s ({:.0f} records/s)\n", out.count(), in.lines(), a.out,
             secs, static_cast<double>(out.count()) / secs);
  if (a.skip_bad_lines) fmt::print("skipped {} bad lines\n", in.bad_lines());
}

}  // namespace

void add_convert(CLI::App& app, Run& run) {
  auto a = std::make_shared<ConvertArgs>();
  auto* c = app.add_subcommand("convert", "Convert Criteo TSV files to sparq's binary format");
  c->add_option("inputs", a->inputs, "Criteo TSV files (concatenated in order)")->required();
  c->add_option("--out,-o", a->out, "Output binary file")->required();
  c->add_flag("--skip-bad-lines", a->skip_bad_lines, "Skip and count malformed lines instead of stopping");
  c->callback([a, &run] { run = [a] { run_convert(*a); }; });
}

}  // namespace sparq::cli
