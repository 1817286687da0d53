// `sparq bench allreduce|alltoall`: time the collectives over a range of
// sizes and algorithms, check every result, and read the bytes each rank put
// on the wire from the transport's counters.
//
// One row per size x algorithm. Each timed iteration starts after a barrier;
// its time is the slowest rank's, so a row's median is what a user waits for.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <vector>

#include "sparq/coll/allreduce.h"
#include "sparq/coll/alltoall.h"
#include "sparq/coll/broadcast.h"
#include "sparq/core/dtype.h"
#include "sparq/core/units.h"
#include "sparq/transport/launch.h"
#include "tools/commands.h"

namespace sparq::cli {

namespace {

struct BenchFlags {
  std::string sizes = "4KiB:64MiB";
  std::string algos;
  int iters = 20, warmup = 5, ranks = 0;
  std::string json_path, dtype = "float32", op = "sum";
  bool in_place = false;
  std::string segment = "1MiB";
  std::string auto_small = "32KiB", auto_small_folded = "256KiB";
  double timeout_s = 300;
  std::string net;  // alpha-beta model for the virtual clock; empty = real time only
};

struct Row {
  std::uint64_t size, count;
  std::string algo;
  double median_us, p10_us, p90_us, algbw, busbw;
  double bytes_sent_per_rank;  // mean over ranks; NaN when not counted (native)
  std::uint64_t wrong;
  double sim_us;  // simulated time of one call (slowest rank), NaN without --net
};

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// Small integers, so that every sum over any rank count is exact in floats.
template <class T>
T input_value(std::size_t i, int rank) {
  return static_cast<T>(static_cast<int>((i * 7 + static_cast<std::size_t>(rank) * 13) % 32) - 8);
}

template <class T>
T expected_allreduce(std::size_t i, int nranks, ReduceOp op) {
  T acc = input_value<T>(i, 0);
  for (int r = 1; r < nranks; ++r) {
    const T v = input_value<T>(i, r);
    acc = op == ReduceOp::Sum ? acc + v : op == ReduceOp::Min ? std::min(acc, v) : std::max(acc, v);
  }
  return acc;
}

// The slowest rank's value (and the sum, for byte means): a small allreduce.
double reduce_scalar(Transport& t, double v, ReduceOp op) {
  AllreduceOptions o;
  o.op = op;
  o.algo = AllreduceAlgo::RecursiveDoubling;
  allreduce(t, std::span<double>(&v, 1), o);
  return v;
}

// Times `body` (one collective, returning its stats) and checks with `check`
// (returns the number of wrong elements on this rank).
template <class Body, class Prep, class Check>
Row time_rows(Transport& t, const BenchFlags& f, std::uint64_t size, std::uint64_t count, const std::string& algo,
              Prep&& prep, Body&& body, Check&& check) {
  std::vector<double> times;
  std::uint64_t wrong = 0;
  double bytes = 0;
  bool counted = true;
  std::string ran = algo;  // what `auto` resolved to
  std::vector<double> sims;
  for (int it = 0; it < f.warmup + f.iters; ++it) {
    prep();
    barrier(t);
    const auto t0 = Clock::now();
    CollStats s = body();
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    wrong += check();
    if (it < f.warmup) continue;
    times.push_back(reduce_scalar(t, us, ReduceOp::Max));
    bytes = static_cast<double>(s.wire.bytes_sent);
    counted = s.counted;
    ran = s.algo;
    if (s.sim_seconds) sims.push_back(reduce_scalar(t, *s.sim_seconds * 1e6, ReduceOp::Max));
  }
  wrong = static_cast<std::uint64_t>(reduce_scalar(t, static_cast<double>(wrong), ReduceOp::Sum));
  const double mean_bytes = reduce_scalar(t, bytes, ReduceOp::Sum) / t.size();
  Row r{size, count, ran == algo ? algo : algo + ":" + ran, percentile(times, 0.5), percentile(times, 0.1), percentile(times, 0.9), 0, 0,
        counted ? mean_bytes : std::nan(""), wrong, sims.empty() ? std::nan("") : percentile(sims, 0.5)};
  r.algbw = static_cast<double>(size) / (r.median_us * 1e3);
  return r;
}

template <class T>
std::vector<Row> bench_allreduce(Transport& t, const BenchFlags& f, const std::vector<std::uint64_t>& sizes,
                                 const std::vector<std::string>& algos) {
  const int p = t.size();
  const ReduceOp op = parse_reduce_op(f.op);
  std::vector<Row> rows;
  for (std::uint64_t size : sizes) {
    const std::size_t n = size / sizeof(T);
    std::vector<T> in(n), out(n);
    for (std::size_t i = 0; i < n; ++i) in[i] = input_value<T>(i, t.rank());
    std::vector<T> expect(n);
    for (std::size_t i = 0; i < n; ++i) expect[i] = expected_allreduce<T>(i, p, op);
    for (const std::string& name : algos) {
      AllreduceOptions o;
      o.algo = parse_allreduce_algo(name);
      o.op = op;
      o.segment_bytes = parse_bytes(f.segment);
      o.auto_rule = {parse_bytes(f.auto_small), parse_bytes(f.auto_small_folded)};
      auto prep = [&] {
        if (f.in_place) std::copy(in.begin(), in.end(), out.begin());
        else std::fill(out.begin(), out.end(), T(-99));
      };
      auto body = [&] {
        return f.in_place ? allreduce(t, std::span<T>(out), o)
                          : allreduce(t, std::span<const T>(in), std::span<T>(out), o);
      };
      auto check = [&] {
        std::uint64_t w = 0;
        for (std::size_t i = 0; i < n; ++i) w += out[i] != expect[i];
        return w;
      };
      Row r = time_rows(t, f, n * sizeof(T), n, name, prep, body, check);
      r.busbw = r.algbw * 2.0 * (p - 1) / p;
      rows.push_back(r);
    }
  }
  return rows;
}

template <class T>
std::vector<Row> bench_alltoall(Transport& t, const BenchFlags& f, const std::vector<std::uint64_t>& sizes,
                                const std::vector<std::string>& algos) {
  const int p = t.size(), me = t.rank();
  std::vector<Row> rows;
  for (std::uint64_t size : sizes) {
    // `size` bytes per rank in total, an equal block for every peer.
    const std::size_t block = size / sizeof(T) / p, n = block * p;
    std::vector<T> in(n), out(n);
    // Element j of the block for rank d from rank s: a value all three know.
    auto value = [&](int s, int d, std::size_t j) { return static_cast<T>((s * 31 + d * 7 + j) % 97); };
    for (int d = 0; d < p; ++d)
      for (std::size_t j = 0; j < block; ++j) in[d * block + j] = value(me, d, j);
    for (const std::string& name : algos) {
      AlltoallOptions o;
      o.algo = parse_alltoall_algo(name);
      auto prep = [&] { std::fill(out.begin(), out.end(), T(-1)); };
      auto body = [&] { return alltoall(t, std::span<const T>(in), std::span<T>(out), o); };
      auto check = [&] {
        std::uint64_t w = 0;
        for (int s = 0; s < p; ++s)
          for (std::size_t j = 0; j < block; ++j) w += out[s * block + j] != value(s, me, j);
        return w;
      };
      Row r = time_rows(t, f, n * sizeof(T), n, name, prep, body, check);
      r.busbw = r.algbw * (p - 1) / p;
      rows.push_back(r);
    }
  }
  return rows;
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    const std::size_t comma = s.find(',', start);
    const std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

void print_rows(const std::vector<Row>& rows, const std::string& what, int nranks, std::string_view transport,
                const BenchFlags& f) {
  fmt::print("# sparq bench {}: {} ranks ({} transport), dtype {}, {} iters after {} warm-up, times in us "
             "(median and p10/p90 of the slowest rank per iteration)\n",
             what, nranks, transport, f.dtype, f.iters, f.warmup);
  const bool sim = !f.net.empty();
  if (sim) fmt::print("# simulated network {} (virtual clock): sim_time_us per call, slowest rank\n", f.net);
  fmt::print("{:>10} {:>10} {:>20} {:>16} {:>10} {:>10} {:>10} {:>10} {:>19} {:>6}{}\n", "size", "count", "algo",
             "time_us(median)", "p10", "p90", "algbw_GBps", "busbw_GBps", "bytes_sent_per_rank", "#wrong",
             sim ? fmt::format(" {:>12}", "sim_time_us") : "");
  for (const Row& r : rows) {
    const std::string bytes = std::isnan(r.bytes_sent_per_rank) ? "-" : fmt::format("{:.0f}", r.bytes_sent_per_rank);
    fmt::print("{:>10} {:>10} {:>20} {:>16.1f} {:>10.1f} {:>10.1f} {:>10.3f} {:>10.3f} {:>19} {:>6}{}\n", r.size,
               r.count, r.algo, r.median_us, r.p10_us, r.p90_us, r.algbw, r.busbw, bytes, r.wrong,
               sim ? fmt::format(" {:>12.1f}", r.sim_us) : "");
  }
}

void write_json(const std::string& path, const std::vector<Row>& rows, const std::string& what, int nranks,
                std::string_view transport, const BenchFlags& f) {
  nlohmann::json arr = nlohmann::json::array();
  for (const Row& r : rows) {
    nlohmann::json j = {{"collective", what}, {"ranks", nranks},     {"transport", transport},
                        {"dtype", f.dtype},   {"size", r.size},      {"count", r.count},
                        {"algo", r.algo},     {"time_us", r.median_us}, {"p10", r.p10_us},
                        {"p90", r.p90_us},    {"algbw_GBps", r.algbw}, {"busbw_GBps", r.busbw},
                        {"wrong", r.wrong},   {"iters", f.iters}};
    j["bytes_sent_per_rank"] = std::isnan(r.bytes_sent_per_rank) ? nlohmann::json(nullptr)
                                                                  : nlohmann::json(r.bytes_sent_per_rank);
    j["sim_time_us"] = std::isnan(r.sim_us) ? nlohmann::json(nullptr) : nlohmann::json(r.sim_us);
    if (!f.net.empty()) j["net"] = f.net;
    arr.push_back(j);
  }
  std::ofstream out(path);
  SPARQ_CHECK_AS(InputError, out.good(), "cannot write --json file '{}'", path);
  out << arr.dump(1) << "\n";
  SPARQ_CHECK_AS(InputError, out.good(), "error writing --json file '{}'", path);
}

void add_one(CLI::App& bench, Run& run, const std::string& what, const std::string& algo_help,
             const std::string& default_algos) {
  auto f = std::make_shared<BenchFlags>();
  f->algos = default_algos;
  CLI::App* c = bench.add_subcommand(what, "Time " + what + " over sizes and algorithms");
  c->add_option("--sizes", f->sizes, "bytes per rank: LOW:HIGH (powers of two) or a comma list, e.g. 4KiB:64MiB")
      ->capture_default_str();
  c->add_option("--algo", f->algos, "comma list of " + algo_help)->capture_default_str();
  c->add_option("--iters", f->iters, "timed iterations per row")->capture_default_str()->check(CLI::PositiveNumber);
  c->add_option("--warmup", f->warmup, "untimed iterations first")->capture_default_str()->check(CLI::NonNegativeNumber);
  c->add_option("--dtype", f->dtype, "float32, float64, int32 or int64")->capture_default_str();
  c->add_option("--json", f->json_path, "also write the rows as a JSON array to this file");
  c->add_option("--ranks", f->ranks, "in-process ranks (threads over LocalTransport); not with mpiexec")
      ->check(CLI::PositiveNumber);
  c->add_option("--net", f->net,
                "simulate an alpha-beta network BANDWIDTH,LATENCY (e.g. 10gbit,20us): adds sim_time_us");
  c->add_option("--timeout", f->timeout_s, "seconds a rank waits for a peer before failing")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  if (what == "allreduce") {
    c->add_option("--op", f->op, "sum, min or max")->capture_default_str();
    c->add_flag("--in-place", f->in_place, "reduce in place instead of into a separate output");
    c->add_option("--segment", f->segment, "ring pipelining segment size")->capture_default_str();
    c->add_option("--auto-small", f->auto_small, "auto: recursive-doubling up to this size (P a power of two)")
        ->capture_default_str();
    c->add_option("--auto-small-folded", f->auto_small_folded,
                  "auto: recursive-doubling up to this size (other P)")
        ->capture_default_str();
  }
  c->callback([&run, f, what] {
    run = [f, what] {
      const auto sizes = parse_byte_range(f->sizes);
      const auto algos = split_list(f->algos);
      SPARQ_CHECK_AS(InputError, !algos.empty(), "--algo is empty");
      const DType dt = parse_dtype(f->dtype);
      if (what == "allreduce") {
        parse_reduce_op(f->op);
        for (const auto& a : algos) parse_allreduce_algo(a);
        parse_bytes(f->segment);
        parse_bytes(f->auto_small);
        parse_bytes(f->auto_small_folded);
      } else {
        for (const auto& a : algos) parse_alltoall_algo(a);
      }
      LaunchOptions lo;
      lo.ranks = f->ranks;
      lo.timeout = std::chrono::milliseconds(static_cast<long long>(f->timeout_s * 1000));
      if (!f->net.empty()) lo.net = parse_net_model(f->net);
      launch(lo, [&](Transport& t) {
        std::vector<Row> rows = dispatch_dtype(dt, [&]<class T>() {
          return what == "allreduce" ? bench_allreduce<T>(t, *f, sizes, algos) : bench_alltoall<T>(t, *f, sizes, algos);
        });
        std::uint64_t wrong = 0;
        for (const Row& r : rows) wrong += r.wrong;
        if (t.rank() == 0) {
          print_rows(rows, what, t.size(), t.name(), *f);
          if (!f->json_path.empty()) write_json(f->json_path, rows, what, t.size(), t.name(), *f);
        }
        SPARQ_CHECK(wrong == 0, "{} {} produced {} wrong elements", what, f->algos, wrong);
      });
    };
  });
}

}  // namespace

void add_bench(CLI::App& app, Run& run) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks of the collectives");
  bench->require_subcommand(1);
  add_one(*bench, run, "allreduce", "auto, ring, recursive-doubling, rabenseifner, native (native: MPI only)",
          "auto,ring,recursive-doubling,rabenseifner");
  add_one(*bench, run, "alltoall", "pairwise, native (native: MPI only)", "pairwise");
}

}  // namespace sparq::cli
