// `sparq bench sparse-allreduce`: SparCML's experiment. Every rank holds a
// vector of dimension N with about N * density non-zeros at uniformly random
// indices (independent across ranks, so fill-in grows with P); the table
// reports time, bytes on the wire, the result's nnz and, with --net, the
// simulated time.
//
// Check: values are small integers, so the exact sum is known; each rank
// compares two checksums of its result (sum of values and a position-weighted
// sum) with the totals of all ranks' inputs. QSGD rows are lossy and not
// checked here (tests/coll bound their error).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <random>

#include "sparq/coll/sparse_allreduce.h"
#include "sparq/core/units.h"
#include "tools/bench_table.h"
#include "tools/commands.h"

namespace sparq::cli {

namespace {

using compress::SparseStream;

struct SparseFlags {
  BenchFlags common;
  std::string dim = "16M", densities = "0.78%";
  std::string algos = "ssar-recursive-double,ssar-split-allgather,dsar-split-allgather,dense,auto";
  int qsgd_bits = 0;
  std::uint64_t seed = 1;
};

// "16M" -> 16 * 2^20, "1000" -> 1000 (K, M, G are binary multiples).
std::size_t parse_count(const std::string& s) {
  std::size_t n = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  SPARQ_CHECK_AS(InputError, ec == std::errc() && p != s.data(), "bad --dim '{}': expected e.g. 16M or 1000000", s);
  const std::string unit(p, s.data() + s.size());
  const std::size_t mult = unit.empty() ? 1 : unit == "K" ? 1u << 10 : unit == "M" ? 1u << 20 : unit == "G" ? 1u << 30 : 0;
  SPARQ_CHECK_AS(InputError, mult != 0, "bad --dim '{}': unit must be K, M or G", s);
  SPARQ_CHECK_AS(InputError, n > 0 && n * mult < (1ull << 32), "--dim '{}' must be in [1, 2^32)", s);
  return n * mult;
}

// "0.78%" or "0.0078" -> 0.0078.
double parse_density(const std::string& s) {
  const bool pct = !s.empty() && s.back() == '%';
  double d = 0;
  const char* end = s.data() + s.size() - (pct ? 1 : 0);
  auto [p, ec] = std::from_chars(s.data(), end, d);
  SPARQ_CHECK_AS(InputError, ec == std::errc() && p == end, "bad --density '{}': expected e.g. 0.78% or 0.0078", s);
  if (pct) d /= 100;
  SPARQ_CHECK_AS(InputError, d > 0 && d <= 1, "--density '{}' must be in (0, 100%]", s);
  return d;
}

SparseStream make_input(std::size_t n, double density, int rank, std::uint64_t seed) {
  std::mt19937_64 g(seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(rank));
  const std::size_t k = std::max<std::size_t>(1, static_cast<std::size_t>(static_cast<double>(n) * density));
  std::vector<std::uint32_t> idx(k);
  std::uniform_int_distribution<std::uint32_t> pick(0, static_cast<std::uint32_t>(n - 1));
  for (auto& i : idx) i = pick(g);
  std::sort(idx.begin(), idx.end());
  idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
  std::vector<float> v(idx.size());
  for (auto& x : v) {  // non-zero integers in [-4, 4]
    const int mag = static_cast<int>(g() % 4) + 1;
    x = static_cast<float>(g() % 2 ? mag : -mag);
  }
  return SparseStream::sparse(n, std::move(idx), std::move(v));
}

// (sum of values, sum of (i % 1021 + 1) * value): exact in double for these inputs.
std::pair<double, double> checksums(const SparseStream& s) {
  double a = 0, b = 0;
  if (s.is_dense()) {
    for (std::size_t i = 0; i < s.dim(); ++i) a += s.values()[i], b += static_cast<double>(i % 1021 + 1) * s.values()[i];
  } else {
    for (std::size_t j = 0; j < s.nnz(); ++j)
      a += s.values()[j], b += static_cast<double>(s.indices()[j] % 1021 + 1) * s.values()[j];
  }
  return {a, b};
}

std::vector<Row> run_bench(Transport& t, const SparseFlags& f, std::size_t n, const std::vector<double>& densities,
                           const std::vector<std::string>& algos) {
  std::vector<Row> rows;
  for (double d : densities) {
    const SparseStream in = make_input(n, d, t.rank(), f.seed);
    const auto [a, b] = checksums(in);
    const double total_a = reduce_scalar(t, a, false), total_b = reduce_scalar(t, b, false);
    for (const std::string& name : algos) {
      SparseAllreduceOptions o;
      o.algo = parse_sparse_algo(name);
      if (f.qsgd_bits) o.dense_qsgd = compress::QsgdOptions{f.qsgd_bits};
      if (!f.common.net.empty()) o.auto_rule.net = parse_net_model(f.common.net);
      SparseAutoHistory history;  // auto plans as in training: from the previous call's result
      o.history = &history;
      SparseStream out;
      std::uint64_t step = 0;
      Row r = time_rows(
          t, f.common, name, [] {},
          [&] {
            o.step = step++;
            return sparse_allreduce(t, in, out, o);
          },
          [&] {
            if (o.dense_qsgd && (o.algo == SparseAlgo::DsarSplitAllgather || o.algo == SparseAlgo::Auto)) return 0;
            const auto [ra, rb] = checksums(out);
            return ra == total_a && rb == total_b ? 0 : 1;
          });
      const bool lossy = f.qsgd_bits && r.algo.find("dsar") != std::string::npos;
      r.checked = !lossy;
      set_size_and_rates(r, n * sizeof(float), n, std::nan(""));  // no bus bandwidth for sparse data
      r.density = d;
      r.codec = lossy ? fmt::format("qsgd{}", f.qsgd_bits) : "fp32";
      r.result_nnz = static_cast<double>(out.nnz());
      rows.push_back(r);
    }
  }
  return rows;
}

}  // namespace

void add_bench_sparse(CLI::App& bench, Run& run) {
  auto f = std::make_shared<SparseFlags>();
  f->common.iters = 5;
  f->common.warmup = 1;
  CLI::App* c = bench.add_subcommand("sparse-allreduce", "Time sparse allreduce (SparCML) over densities and algorithms");
  c->add_option("--dim", f->dim, "vector dimension N (K, M, G = 2^10, 2^20, 2^30)")->capture_default_str();
  c->add_option("--density", f->densities, "comma list of densities per rank, e.g. 0.1%,0.78%,10%")
      ->capture_default_str();
  c->add_option("--algo", f->algos,
                "comma list of ssar-recursive-double, ssar-split-allgather, dsar-split-allgather, dense, auto")
      ->capture_default_str();
  c->add_option("--qsgd", f->qsgd_bits, "QSGD bits (2, 4, 8) for the dense phase of dsar-split-allgather; 0 = fp32")
      ->capture_default_str();
  c->add_option("--seed", f->seed, "seed of the random index sets")->capture_default_str();
  add_bench_flags(c, f->common);
  c->callback([&run, f] {
    run = [f] {
      const std::size_t n = parse_count(f->dim);
      std::vector<double> densities;
      for (const auto& d : split_list(f->densities)) densities.push_back(parse_density(d));
      SPARQ_CHECK_AS(InputError, !densities.empty(), "--density is empty");
      const auto algos = split_list(f->algos);
      SPARQ_CHECK_AS(InputError, !algos.empty(), "--algo is empty");
      for (const auto& a : algos) parse_sparse_algo(a);
      SPARQ_CHECK_AS(InputError, f->qsgd_bits == 0 || f->qsgd_bits == 2 || f->qsgd_bits == 4 || f->qsgd_bits == 8,
                     "--qsgd must be 0, 2, 4 or 8, got {}", f->qsgd_bits);
      launch(launch_options(f->common), [&](Transport& t) {
        const std::vector<Row> rows = run_bench(t, *f, n, densities, algos);
        std::uint64_t wrong = 0;
        for (const Row& r : rows) wrong += r.wrong;
        if (t.rank() == 0) report(rows, "sparse-allreduce", t, f->common, fmt::format("N = {}", n));
        SPARQ_CHECK(wrong == 0, "sparse allreduce produced {} wrong results", wrong);
      });
    };
  });
}

}  // namespace sparq::cli
