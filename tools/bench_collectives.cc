// `sparq bench allreduce|alltoall`: time the dense collectives over a range
// of sizes and algorithms, check every result, and read the bytes each rank
// put on the wire from the transport's counters.
#include <algorithm>

#include "sparq/coll/allreduce.h"
#include "sparq/coll/alltoall.h"
#include "sparq/core/dtype.h"
#include "sparq/core/units.h"
#include "tools/bench_collectives.h"
#include "tools/bench_table.h"
#include "tools/commands.h"

namespace sparq::cli {

namespace {

struct DenseFlags {
  BenchFlags common;
  std::string sizes = "4KiB:64MiB", algos, dtype = "float32", op = "sum";
  bool in_place = false;
  std::string segment = "1MiB", auto_small = "32KiB", auto_small_folded = "256KiB";
};

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

template <class T>
std::vector<Row> bench_allreduce(Transport& t, const DenseFlags& f, const std::vector<std::uint64_t>& sizes,
                                 const std::vector<std::string>& algos) {
  const int p = t.size();
  const ReduceOp op = parse_reduce_op(f.op);
  std::vector<Row> rows;
  for (std::uint64_t size : sizes) {
    const std::size_t n = size / sizeof(T);
    std::vector<T> in(n), out(n), expect(n);
    for (std::size_t i = 0; i < n; ++i) in[i] = input_value<T>(i, t.rank());
    for (std::size_t i = 0; i < n; ++i) expect[i] = expected_allreduce<T>(i, p, op);
    for (const std::string& name : algos) {
      AllreduceOptions o;
      o.algo = parse_allreduce_algo(name);
      o.op = op;
      o.segment_bytes = parse_bytes(f.segment);
      o.auto_rule = {parse_bytes(f.auto_small), parse_bytes(f.auto_small_folded)};
      Row r = time_rows(
          t, f.common, name,
          [&] {
            if (f.in_place) std::copy(in.begin(), in.end(), out.begin());
            else std::fill(out.begin(), out.end(), T(-99));
          },
          [&] {
            return f.in_place ? allreduce(t, std::span<T>(out), o)
                              : allreduce(t, std::span<const T>(in), std::span<T>(out), o);
          },
          [&] {
            std::uint64_t w = 0;
            for (std::size_t i = 0; i < n; ++i) w += out[i] != expect[i];
            return w;
          });
      set_size_and_rates(r, n * sizeof(T), n, allreduce_bus_factor(p));
      rows.push_back(r);
    }
  }
  return rows;
}

template <class T>
std::vector<Row> bench_alltoall(Transport& t, const DenseFlags& f, const std::vector<std::uint64_t>& sizes,
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
      Row r = time_rows(
          t, f.common, name, [&] { std::fill(out.begin(), out.end(), T(-1)); },
          [&] { return alltoall(t, std::span<const T>(in), std::span<T>(out), o); },
          [&] {
            std::uint64_t w = 0;
            for (int s = 0; s < p; ++s)
              for (std::size_t j = 0; j < block; ++j) w += out[s * block + j] != value(s, me, j);
            return w;
          });
      set_size_and_rates(r, n * sizeof(T), n, alltoall_bus_factor(p));
      rows.push_back(r);
    }
  }
  return rows;
}

void add_one(CLI::App& bench, Run& run, const std::string& what, const std::string& algo_help,
             const std::string& default_algos) {
  auto f = std::make_shared<DenseFlags>();
  f->algos = default_algos;
  CLI::App* c = bench.add_subcommand(what, "Time " + what + " over sizes and algorithms");
  c->add_option("--sizes", f->sizes, "bytes per rank: LOW:HIGH (powers of two) or a comma list, e.g. 4KiB:64MiB")
      ->capture_default_str();
  c->add_option("--algo", f->algos, "comma list of " + algo_help)->capture_default_str();
  c->add_option("--dtype", f->dtype, "float32, float64, int32 or int64")->capture_default_str();
  add_bench_flags(c, f->common);
  if (what == "allreduce") {
    c->add_option("--op", f->op, "sum, min or max")->capture_default_str();
    c->add_flag("--in-place", f->in_place, "reduce in place instead of into a separate output");
    c->add_option("--segment", f->segment, "ring pipelining segment size")->capture_default_str();
    c->add_option("--auto-small", f->auto_small, "auto: recursive-doubling up to this size (P a power of two)")
        ->capture_default_str();
    c->add_option("--auto-small-folded", f->auto_small_folded, "auto: recursive-doubling up to this size (other P)")
        ->capture_default_str();
  }
  c->callback([&run, f, what] {
    run = [f, what] {
      // Validate every flag before starting ranks.
      const auto sizes = parse_byte_range(f->sizes);
      const auto algos = split_list(f->algos);
      SPARQ_CHECK_AS(InputError, !algos.empty(), "--algo is empty");
      const DType dt = parse_dtype(f->dtype);
      if (what == "allreduce") {
        parse_reduce_op(f->op);
        for (const auto& a : algos) parse_allreduce_algo(a);
        for (const auto* b : {&f->segment, &f->auto_small, &f->auto_small_folded}) parse_bytes(*b);
      } else {
        for (const auto& a : algos) parse_alltoall_algo(a);
      }
      launch(launch_options(f->common), [&](Transport& t) {
        std::vector<Row> rows = dispatch_dtype(dt, [&]<class T>() {
          return what == "allreduce" ? bench_allreduce<T>(t, *f, sizes, algos) : bench_alltoall<T>(t, *f, sizes, algos);
        });
        std::uint64_t wrong = 0;
        for (const Row& r : rows) wrong += r.wrong;
        if (t.rank() == 0) report(rows, what, t, f->common, "dtype " + f->dtype);
        SPARQ_CHECK(wrong == 0, "{} {} produced {} wrong elements", what, f->algos, wrong);
      });
    };
  });
}

}  // namespace

std::vector<Row> ring_allreduce_rows(Transport& t, const BenchFlags& f, const std::vector<std::uint64_t>& sizes) {
  DenseFlags d;
  d.common = f;
  return bench_allreduce<float>(t, d, sizes, {"ring"});
}

std::vector<Row> pairwise_alltoall_rows(Transport& t, const BenchFlags& f, const std::vector<std::uint64_t>& sizes) {
  DenseFlags d;
  d.common = f;
  return bench_alltoall<float>(t, d, sizes, {"pairwise"});
}

void add_bench(CLI::App& app, Run& run) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks of the collectives");
  bench->require_subcommand(1);
  add_one(*bench, run, "allreduce", "auto, ring, recursive-doubling, rabenseifner, native (native: MPI only)",
          "auto,ring,recursive-doubling,rabenseifner");
  add_one(*bench, run, "alltoall", "pairwise, native (native: MPI only)", "pairwise");
  add_bench_sparse(*bench, run);
  add_bench_quantized(*bench, run);
}

}  // namespace sparq::cli
