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
  bool scan = false;
};

// --scan: read every record of each input (TSV through the streaming parser,
// binary through the memory map), touching every field, and report the rate:
// the cost of the data path without a model.
void run_scan(const ConvertArgs& a) {
  for (const auto& path : a.inputs) {
    const auto t0 = std::chrono::steady_clock::now();
    std::size_t n = 0, bad = 0;
    double checksum = 0;
    auto touch = [&](const CriteoRecord& r) {
      float s = r.label;
      for (float d : r.dense) s += d;
      std::uint32_t x = 0;
      for (std::uint32_t c : r.sparse) x ^= c;
      checksum += s + static_cast<double>(x & 0xff);
      ++n;
    };
    const bool bin = is_binary_records(path);
    if (bin) {
      MappedRecords m(path);
      for (const auto& r : m.records()) touch(r);
    } else {
      TsvOptions o;
      o.skip_bad_lines = a.skip_bad_lines;
      TsvStream s({path}, o);
      CriteoRecord r;
      while (s.next(r)) touch(r);
      bad = s.bad_lines();
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print("scanned {} ({}): {} records in {:.3f} s, {:.0f} records/s{} (checksum {:.6g})\n", path,
               bin ? "binary, mmap" : "tsv", n, secs, static_cast<double>(n) / secs,
               a.skip_bad_lines ? fmt::format(", {} bad lines skipped", bad) : "", checksum);
  }
}

void run_convert(const ConvertArgs& a) {
  if (a.scan) return run_scan(a);
  SPARQ_CHECK_AS(InputError, !a.out.empty(), "--out is required (or --scan to only read)");
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
  c->add_option("--out,-o", a->out, "Output binary file");
  c->add_flag("--scan", a->scan, "Only read the inputs (TSV or binary) and report records/s");
  c->add_flag("--skip-bad-lines", a->skip_bad_lines, "Skip and count malformed lines instead of stopping");
  c->callback([a, &run] { run = [a] { run_convert(*a); }; });
}

}  // namespace sparq::cli
