#include "tools/bench_table.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "sparq/coll/allreduce.h"
#include "sparq/coll/broadcast.h"
#include "tools/commands.h"

namespace sparq::cli {

void add_bench_flags(CLI::App* c, BenchFlags& f) {
  c->add_option("--iters", f.iters, "timed iterations per row")->capture_default_str()->check(kPositive);
  c->add_option("--warmup", f.warmup, "untimed iterations first")->capture_default_str()->check(CLI::NonNegativeNumber);
  c->add_option("--json", f.json_path, "also write the rows as a JSON array to this file");
  c->add_option("--ranks", f.ranks, "in-process ranks (threads over LocalTransport); not with mpiexec")
      ->check(kPositive);
  c->add_option("--net", f.net,
                "simulate an alpha-beta network BANDWIDTH,LATENCY[,CPU_PER_BYTE[,CPU_PER_MESSAGE[,LATENCY_PER_COLLECTIVE]]] (e.g. "
                "10gbit,20us): adds sim_time_us");
  c->add_option("--compute-scale", f.cpu_scale,
                "with --net: each rank's CPU time (reductions, codecs) times this is modelled computation "
                "(0: the network alone)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  c->add_option("--timeout", f.timeout_s, "seconds a rank waits for a peer before failing")
      ->capture_default_str()
      ->check(kPositive);
}

LaunchOptions launch_options(const BenchFlags& f) {
  LaunchOptions lo;
  lo.ranks = f.ranks;
  lo.timeout = std::chrono::milliseconds(static_cast<long long>(f.timeout_s * 1000));
  if (!f.net.empty()) lo.net = parse_net_model(f.net);
  SPARQ_CHECK_AS(InputError, f.cpu_scale == 0 || lo.net, "--compute-scale needs --net (it scales modelled time)");
  lo.cpu_scale = f.cpu_scale;
  return lo;
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

double reduce_scalar(Transport& t, double v, bool max) {
  AllreduceOptions o;
  o.op = max ? ReduceOp::Max : ReduceOp::Sum;
  o.algo = AllreduceAlgo::RecursiveDoubling;
  allreduce(t, std::span<double>(&v, 1), o);
  return v;
}

Row time_rows(Transport& t, const BenchFlags& f, const std::string& algo, const std::function<void()>& prep,
              const std::function<CollStats()>& body, const std::function<std::uint64_t()>& check) {
  std::vector<double> times, sims;
  std::uint64_t wrong = 0;
  double bytes = 0;
  bool counted = true;
  std::string ran = algo;  // what `auto` resolved to
  for (int it = 0; it < f.warmup + f.iters; ++it) {
    prep();
    barrier(t);
    const auto t0 = Clock::now();
    const CollStats s = body();
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    wrong += check();
    if (it < f.warmup) continue;
    times.push_back(reduce_scalar(t, us, true));
    bytes = static_cast<double>(s.wire.bytes_sent);
    counted = s.counted;
    ran = s.algo;
    if (s.sim_seconds) sims.push_back(reduce_scalar(t, *s.sim_seconds * 1e6, true));
  }
  Row r;
  r.wrong = static_cast<std::uint64_t>(reduce_scalar(t, static_cast<double>(wrong), false));
  const double mean_bytes = reduce_scalar(t, bytes, false) / t.size();
  r.algo = ran == algo ? algo : algo + ":" + ran;
  r.median_us = percentile(times, 0.5);
  r.p10_us = percentile(times, 0.1);
  r.p90_us = percentile(times, 0.9);
  if (counted) r.bytes_sent_per_rank = mean_bytes;
  if (!sims.empty()) r.sim_us = percentile(sims, 0.5);
  return r;
}

void set_size_and_rates(Row& r, std::uint64_t size, std::uint64_t count, double bus_factor) {
  r.size = size;
  r.count = count;
  r.algbw = static_cast<double>(size) / (r.median_us * 1e3);
  r.busbw = r.algbw * bus_factor;
}

double allreduce_bus_factor(int p) { return 2.0 * (p - 1) / p; }
double alltoall_bus_factor(int p) { return static_cast<double>(p - 1) / p; }

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = s.find(',', start);
    const std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

namespace {
std::string or_dash(double v, const char* spec) { return std::isnan(v) ? "-" : fmt::format(fmt::runtime(spec), v); }
nlohmann::json or_null(double v) { return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v); }
}  // namespace

void report(const std::vector<Row>& rows, const std::string& what, Transport& t, const BenchFlags& f,
            const std::string& header_note) {
  const bool sim = !f.net.empty();
  // Optional columns appear when some row has them.
  const bool density = std::any_of(rows.begin(), rows.end(), [](const Row& r) { return !std::isnan(r.density); });
  const bool codec = std::any_of(rows.begin(), rows.end(), [](const Row& r) { return !r.codec.empty(); });
  std::size_t codec_w = 7;  // "q4+ec-skip-first" is wider than the usual codecs
  for (const Row& r : rows) codec_w = std::max(codec_w, r.codec.size());
  const bool nnz = std::any_of(rows.begin(), rows.end(), [](const Row& r) { return !std::isnan(r.result_nnz); });
  fmt::print("# sparq bench {}: {} ranks ({} transport), {}, {} iters after {} warm-up, times in us "
             "(median and p10/p90 of the slowest rank per iteration)\n",
             what, t.size(), t.name(), header_note, f.iters, f.warmup);
  std::string head = fmt::format("{:>10} {:>10} ", "size", "count");
  if (density) head += fmt::format("{:>9} ", "density");
  if (codec) head += fmt::format("{:>{}} ", "codec", codec_w);
  head += fmt::format("{:>24} {:>16} {:>10} {:>10} {:>10} {:>10} {:>19}", "algo", "time_us(median)", "p10", "p90",
                      "algbw_GBps", "busbw_GBps", "bytes_sent_per_rank");
  if (nnz) head += fmt::format(" {:>10}", "result_nnz");
  head += fmt::format(" {:>6}", "#wrong");
  if (sim) head += fmt::format(" {:>12}", "sim_time_us");
  fmt::print("{}\n", head);
  for (const Row& r : rows) {
    std::string line = fmt::format("{:>10} {:>10} ", r.size, r.count);
    if (density) line += fmt::format("{:>8.3f}% ", r.density * 100);
    if (codec) line += fmt::format("{:>{}} ", r.codec, codec_w);
    line += fmt::format("{:>24} {:>16.1f} {:>10.1f} {:>10.1f} {:>10} {:>10} {:>19}", r.algo, r.median_us, r.p10_us,
                        r.p90_us, or_dash(r.algbw, "{:.3f}"), or_dash(r.busbw, "{:.3f}"),
                        or_dash(r.bytes_sent_per_rank, "{:.0f}"));
    if (nnz) line += fmt::format(" {:>10}", or_dash(r.result_nnz, "{:.0f}"));
    line += fmt::format(" {:>6}", r.checked ? fmt::format("{}", r.wrong) : "-");
    if (sim) line += fmt::format(" {:>12}", or_dash(r.sim_us, "{:.1f}"));
    fmt::print("{}\n", line);
  }
  if (f.json_path.empty()) return;
  nlohmann::json arr = nlohmann::json::array();
  for (const Row& r : rows) {
    nlohmann::json j = {{"collective", what}, {"ranks", t.size()},      {"transport", t.name()},
                        {"size", r.size},     {"count", r.count},       {"algo", r.algo},
                        {"time_us", r.median_us}, {"p10", r.p10_us},    {"p90", r.p90_us},
                        {"iters", f.iters},   {"note", header_note}};
    j["wrong"] = r.checked ? nlohmann::json(r.wrong) : nlohmann::json(nullptr);
    j["bytes_sent_per_rank"] = or_null(r.bytes_sent_per_rank);
    j["algbw_GBps"] = or_null(r.algbw);
    j["busbw_GBps"] = or_null(r.busbw);
    j["sim_time_us"] = or_null(r.sim_us);
    if (sim) j["net"] = f.net;
    if (density) j["density"] = or_null(r.density);
    if (codec) j["codec"] = r.codec;
    if (nnz) j["result_nnz"] = or_null(r.result_nnz);
    arr.push_back(j);
  }
  std::ofstream out(f.json_path);
  SPARQ_CHECK_AS(InputError, out.good(), "cannot write --json file '{}'", f.json_path);
  out << arr.dump(1) << "\n";
  SPARQ_CHECK_AS(InputError, out.good(), "error writing --json file '{}'", f.json_path);
}

}  // namespace sparq::cli
