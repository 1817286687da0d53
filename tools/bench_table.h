#pragma once
// What every `sparq bench ...` shares: the common flags, timing one
// collective over iterations (barrier first, slowest rank's time), the table
// and its JSON.
#include <CLI/CLI.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "sparq/coll/call.h"
#include "sparq/transport/launch.h"

namespace sparq::cli {

struct BenchFlags {
  int iters = 20, warmup = 5, ranks = 0;
  std::string json_path;
  double timeout_s = 300;
  std::string net;  // alpha-beta model for the virtual clock; empty = real time only
  double cpu_scale = 0;  // with net: CPU time is modelled computation, times this
};

// Registers --iters --warmup --json --ranks --timeout --net --compute-scale on `c`.
void add_bench_flags(CLI::App* c, BenchFlags& f);
LaunchOptions launch_options(const BenchFlags& f);

struct Row {
  std::uint64_t size = 0, count = 0;
  std::string algo;
  double median_us = 0, p10_us = 0, p90_us = 0;
  double algbw = std::nan(""), busbw = std::nan("");  // NaN where meaningless (sparse: busbw)
  double bytes_sent_per_rank = std::nan("");  // mean over ranks; NaN when not counted (native)
  std::uint64_t wrong = 0;
  bool checked = true;  // false for lossy codecs: `#wrong` prints as -
  double sim_us = std::nan("");  // simulated time of one call (slowest rank), NaN without --net
  // Sparse benchmarks only:
  double density = std::nan("");
  std::string codec;
  double result_nnz = std::nan("");
};

// The q-quantile of v (0.5: the median), interpolated between neighbours.
double percentile(std::vector<double> v, double q);
// The slowest rank's value (op Max) or the total (op Sum) of a scalar.
double reduce_scalar(Transport& t, double v, bool max);

// Runs `body` (one collective, returning its stats) warmup + iters times,
// each after prep() and a barrier; check() returns this rank's wrong
// elements. Fills timing, bytes, sim time and wrong count of a Row.
Row time_rows(Transport& t, const BenchFlags& f, const std::string& algo, const std::function<void()>& prep,
              const std::function<CollStats()>& body, const std::function<std::uint64_t()>& check);

// Sets a row's size and count, and its bandwidths from its median time:
// algbw = size / time, busbw = algbw * bus_factor (2(P-1)/P for allreduce,
// (P-1)/P for alltoall, NaN where a bus bandwidth means nothing).
void set_size_and_rates(Row& r, std::uint64_t size, std::uint64_t count, double bus_factor);
double allreduce_bus_factor(int nranks);
double alltoall_bus_factor(int nranks);

std::vector<std::string> split_list(const std::string& s);

// Prints the table (rank 0 calls it) and writes --json if asked.
// Columns density, codec and result_nnz appear when some row sets them.
void report(const std::vector<Row>& rows, const std::string& what, Transport& t, const BenchFlags& f,
            const std::string& header_note);

}  // namespace sparq::cli
