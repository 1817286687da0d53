// `sparq bench quantized-allreduce|quantized-alltoall`: the quantized
// collectives over sizes, codecs and algorithms. Bytes come from the
// transport's counters; with --net the virtual clock gives simulated time.
//
// Check: fp32 results must be exact (integer inputs); row-wise results must
// be within the per-hop bound hops * s/2 (s <= 2 * sum|x| / (2^q - 1));
// QSGD is stochastic and is not checked here (tests bound it).
#include <cmath>

#include "sparq/coll/quantized.h"
#include "sparq/core/units.h"
#include "tools/bench_table.h"
#include "tools/commands.h"

namespace sparq::cli {

namespace {

struct QuantFlags {
  BenchFlags common;
  std::string sizes = "1MiB:64MiB", codecs = "fp32,q8,q4,q2,q4+ec", algos = "ring";
  std::size_t row_len = 512;
  int group = 8;
};

float input_value(std::size_t i, int rank) {
  return static_cast<float>(static_cast<int>((i * 7 + static_cast<std::size_t>(rank) * 13) % 17) - 8);
}

Codec codec_of(const std::string& name, std::size_t row_len) {
  Codec c = parse_codec(name);
  c.row_len = row_len;
  return c;
}

std::vector<Row> run_allreduce(Transport& t, const QuantFlags& f, const std::vector<std::uint64_t>& sizes) {
  const int p = t.size();
  std::vector<Row> rows;
  for (std::uint64_t size : sizes) {
    const std::size_t n = size / sizeof(float);
    std::vector<float> in(n), v(n), exact(n);
    for (std::size_t i = 0; i < n; ++i) in[i] = input_value(i, t.rank());
    for (std::size_t i = 0; i < n; ++i)
      for (int r = 0; r < p; ++r) exact[i] += input_value(i, r);
    for (const std::string& algo : split_list(f.algos))
      for (const std::string& cname : split_list(f.codecs)) {
        compress::ErrorFeedbackStore store;
        QuantizedAllreduceOptions o;
        o.algo = parse_quant_algo(algo);
        o.codec = codec_of(cname, f.row_len);
        o.residuals = &store;
        o.group = f.group;
        const int members = p / std::min(f.group, p);
        const double hops = o.algo == QuantAlgo::Ring ? p : 3 + 2 * std::log2(std::max(members, 1));
        const double tol = o.codec.kind == Codec::Kind::Rowwise
                               ? hops * (2.0 * 8 * p / ((1 << o.codec.rowwise.bits) - 1)) / 2 * 1.01
                               : 0;
        std::uint64_t step = 0;
        Row r = time_rows(
            t, f.common, algo, [&] { v = in; },
            [&] {
              o.step = step++;
              return quantized_allreduce(t, std::span<float>(v), o);
            },
            [&] {
              if (o.codec.kind == Codec::Kind::Qsgd) return std::uint64_t{0};
              std::uint64_t w = 0;
              for (std::size_t i = 0; i < n; ++i) w += !(std::abs(v[i] - exact[i]) <= tol);
              return w;
            });
        r.checked = o.codec.kind != Codec::Kind::Qsgd;
        r.codec = o.codec.name();
        set_size_and_rates(r, size, n, allreduce_bus_factor(p));
        rows.push_back(r);
      }
  }
  return rows;
}

std::vector<Row> run_alltoall(Transport& t, const QuantFlags& f, const std::vector<std::uint64_t>& sizes) {
  const int p = t.size(), me = t.rank();
  std::vector<Row> rows;
  for (std::uint64_t size : sizes) {
    // Blocks of whole rows for every peer.
    const std::size_t block = size / sizeof(float) / p / f.row_len * f.row_len, n = block * p;
    std::vector<float> in(n), out(n);
    auto value = [&](int s, int d, std::size_t j) { return std::sin(0.01f * static_cast<float>(j) + s + 0.1f * d); };
    for (int d = 0; d < p; ++d)
      for (std::size_t j = 0; j < block; ++j) in[d * block + j] = value(me, d, j);
    for (const std::string& cname : split_list(f.codecs)) {
      QuantizedAlltoallOptions o;
      o.codec = codec_of(cname, f.row_len);
      SPARQ_CHECK_AS(InputError, !o.codec.error_comp, "quantized alltoall has no error compensation ('{}')", cname);
      // |x| <= 1.1: a row spans at most 2.2, so s/2 <= 1.1 / (2^q - 1).
      const double tol = o.codec.kind == Codec::Kind::Rowwise ? 1.1 / ((1 << o.codec.rowwise.bits) - 1) * 1.01
                         : o.codec.kind == Codec::Kind::Fp32  ? 0
                                                              : 1e9;
      Row r = time_rows(
          t, f.common, "pairwise", [&] { std::fill(out.begin(), out.end(), -9.0f); },
          [&] { return quantized_alltoall(t, std::span<const float>(in), std::span<float>(out), o); },
          [&] {
            std::uint64_t w = 0;
            for (int s = 0; s < p; ++s)
              for (std::size_t j = 0; j < block; ++j) w += !(std::abs(out[s * block + j] - value(s, me, j)) <= tol);
            return w;
          });
      r.checked = o.codec.kind != Codec::Kind::Qsgd;
      r.codec = o.codec.name();
      set_size_and_rates(r, n * sizeof(float), n, alltoall_bus_factor(p));
      rows.push_back(r);
    }
  }
  return rows;
}

void add_one(CLI::App& bench, Run& run, const std::string& what) {
  auto f = std::make_shared<QuantFlags>();
  const bool ar = what == "quantized-allreduce";
  if (!ar) {
    f->row_len = 16;
    f->codecs = "fp32,q8,q4,q2";
    f->sizes = "64KiB:16MiB";
  }
  CLI::App* c = bench.add_subcommand(what, ar ? "Time quantized allreduce over sizes, codecs and algorithms"
                                              : "Time quantized alltoall (embedding exchange) over sizes and codecs");
  c->add_option("--sizes", f->sizes, "bytes per rank: LOW:HIGH (powers of two) or a comma list")->capture_default_str();
  c->add_option("--codec", f->codecs,
                ar ? "comma list of fp32, q8, q4, q2 (row-wise, +ec for error compensation), qsgd8, qsgd4, qsgd2"
                   : "comma list of fp32, q8, q4, q2, qsgd8, qsgd4, qsgd2")
      ->capture_default_str();
  c->add_option("--row-len", f->row_len, "values per quantization row (a weight row, or the embedding dim)")
      ->capture_default_str()
      ->check(kPositive);
  if (ar) {
    c->add_option("--algo", f->algos, "comma list of ring, recursive-doubling")->capture_default_str();
    c->add_option("--group", f->group, "recursive-doubling: ranks per fully connected group")
        ->capture_default_str()
        ->check(kPositive);
  }
  add_bench_flags(c, f->common);
  c->callback([&run, f, what, ar] {
    run = [f, what, ar] {
      const auto sizes = parse_byte_range(f->sizes);
      SPARQ_CHECK_AS(InputError, !split_list(f->codecs).empty(), "--codec is empty");
      for (const auto& cn : split_list(f->codecs)) parse_codec(cn);
      for (const auto& a : split_list(f->algos)) parse_quant_algo(a);
      launch(launch_options(f->common), [&](Transport& t) {
        const std::vector<Row> rows = ar ? run_allreduce(t, *f, sizes) : run_alltoall(t, *f, sizes);
        std::uint64_t wrong = 0;
        for (const Row& r : rows) wrong += r.wrong;
        if (t.rank() == 0) report(rows, what, t, f->common, fmt::format("rows of {}", f->row_len));
        SPARQ_CHECK(wrong == 0, "{} produced {} elements outside their error bound", what, wrong);
      });
    };
  });
}

}  // namespace

void add_bench_quantized(CLI::App& bench, Run& run) {
  add_one(bench, run, "quantized-allreduce");
  add_one(bench, run, "quantized-alltoall");
}

}  // namespace sparq::cli
