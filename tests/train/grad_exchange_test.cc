// The gradient exchanges of data parallelism against plain references: exact averages for
// `none`, conservation of gradient mass through error feedback for the
// sparsifying codecs (what ranks sent + what they kept == what they had),
// the quantization bound for q8, and measured compression.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>

#include "sparq/train/emb_grad_exchange.h"
#include "sparq/train/grad_exchange.h"
#include "sparq/train/hybrid.h"
#include "sparq/train/verify.h"
#include "tests/coll/reference.h"
#include "tests/support/ranks.h"

namespace sparq {
namespace {

TEST(DpCodec, Parses) {
  EXPECT_EQ(parse_dp_codec("none").kind, DpCodec::Kind::None);
  const DpCodec d = parse_dp_codec("dct:0.99,1000");
  EXPECT_EQ(d.kind, DpCodec::Kind::Dct);
  EXPECT_DOUBLE_EQ(d.eta, 0.99);
  EXPECT_EQ(d.life_span, 1000u);
  const DpCodec k = parse_dp_codec("topk:5/512");
  EXPECT_EQ(k.k, 5u);
  EXPECT_EQ(k.bucket, 512u);
  EXPECT_EQ(parse_dp_codec("q4+ec").codec.name(), "q4+ec");
  EXPECT_FALSE(parse_dp_codec("q4+ec-skip-first", "ring").codec.ec_first_hop);
  EXPECT_EQ(parse_dp_codec("q2+ec-skip-first").codec.name(), "q2+ec-skip-first");
  EXPECT_THROW(parse_dp_codec("q4+ec-skip-first", "recursive-doubling"), InputError);  // the ring's variant
  EXPECT_EQ(parse_dp_codec("qsgd:4").codec.name(), "qsgd4");
  const DpCodec b = parse_dp_codec("dct:0.98,1000+bf16");
  EXPECT_EQ(b.values, compress::ValueFormat::Bf16);
  EXPECT_DOUBLE_EQ(b.eta, 0.98);
  EXPECT_EQ(parse_dp_codec("topk:5/512+bf16").values, compress::ValueFormat::Bf16);
  EXPECT_EQ(parse_dp_codec("dct:0.98,1000+fp8").values, compress::ValueFormat::Fp8);
  EXPECT_EQ(parse_dp_codec("topk:16/512+fp4").values, compress::ValueFormat::Fp4);
  EXPECT_EQ(d.values, compress::ValueFormat::F32);
  EXPECT_THROW(parse_dp_codec("dct:0.9,10+bf16", "dense"), InputError);  // dense would send fp32
  EXPECT_NO_THROW(parse_dp_codec("dct:0.9,10+bf16", "ssar-recursive-double"));
  for (const char* bad : {"dct", "dct:1.0,10", "dct:0.9,0", "dct:0.9", "topk:0/512", "topk:600/512", "topk:5",
                          "q3", "qsgd:3", "gzip", "q4+ec-skip", "q4+ec-skip-first+ec",
                          "dct:x,1", "q8+bf16", "none+bf16", "dct:0.9,10+bf8", "q4+fp8", "dct:0.9,10+fp8+bf16", "q4+fp4", "topk:5/512+fp4+fp8"})
    EXPECT_THROW(parse_dp_codec(bad), InputError) << bad;
}

TEST(GradExchange, NoneIsTheExactAverage) {
  for (int p : {1, 2, 3, 4}) {
    if (!test::ranks_available(p)) continue;
    const std::size_t n = 3001;
    const auto ref = test::reference_reduce<float>(n, p, ReduceOp::Sum);
    test::run_ranks(p, [&](Transport& t) {
      compress::ErrorFeedbackStore store;
      GradExchange x(parse_dp_codec("none"), store);
      auto g = test::rank_input<float>(n, t.rank());
      const ExchangeStats s = x.exchange(t, "bot.0.weight", g, 0);
      for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(g[i], ref.value[i] / p, ref.tolerance[i] / p + 1e-7);
      EXPECT_EQ(s.dense_bytes, p > 1 ? 2u * (p - 1) * n * 4 / p : 0u);
    });
  }
}

// Error feedback loses nothing: after T steps, the sum over steps of the
// averaged exchange plus the residuals left on every rank (divided by P) is
// the sum over steps of the true average gradient.
TEST(GradExchange, SparsifiersConserveGradientMass) {
  const int p = 3, steps = 12;
  SPARQ_NEED_RANKS(p);
  const std::size_t n = 2048;
  // With +bf16 / +fp8 the partial sums are rounded on the way (not fed
  // back), so the books balance only to the format's precision.
  for (const char* spec : {"dct:0.9,5", "topk:8/512", "dct:0.9,5+bf16", "topk:8/512+bf16", "dct:0.9,5+fp8"}) {
    SCOPED_TRACE(spec);
    const std::string_view sv(spec);
    const double tol = sv.ends_with("+bf16") ? 2e-2 : sv.ends_with("+fp8") ? 0.3 : 1e-4;
    test::run_ranks(p, [&](Transport& t) {
      compress::ErrorFeedbackStore store;
      GradExchange x(parse_dp_codec(spec), store);
      std::vector<double> applied(n, 0.0), truth(n, 0.0);
      std::size_t kept = 0;
      for (int k = 0; k < steps; ++k) {
        auto g = test::rank_input<float>(n, t.rank(), 100 + k);
        for (int r = 0; r < p; ++r) {
          const auto gr = test::rank_input<float>(n, r, 100 + k);
          for (std::size_t i = 0; i < n; ++i) truth[i] += gr[i] / double(p);
        }
        kept += x.exchange(t, "top.1.weight", g, k).kept;
        for (std::size_t i = 0; i < n; ++i) applied[i] += g[i];
      }
      // Everybody's residual, averaged, is what has not been applied yet.
      std::vector<float> resid(store.find("top.1.weight").begin(), store.find("top.1.weight").end());
      allreduce(t, std::span<float>(resid));
      for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(applied[i] + resid[i] / p, truth[i], tol) << i;
      EXPECT_LT(kept, steps * n / 5);  // it did sparsify
    });
  }
}

// A fused bucket selects per tensor, as if each were exchanged alone: with
// fp32 values the result, every residual and the count kept are identical
// (sums of the same values, no overlap between tensors); with +fp8 the one
// message scale rounds differently, but each rounding error still lands in
// the residual of its own tensor, so the books balance per tensor (to the
// fp8 rounding of partial sums inside the allreduce, which is not fed back,
// as in SparsifiersConserveGradientMass).
TEST(GradExchange, FusedBucketSelectsPerTensor) {
  const int p = 3;
  SPARQ_NEED_RANKS(p);
  const std::vector<GradExchange::Piece> pieces{{"a", 700}, {"b", 5}, {"c", 1500}};
  const std::size_t n = 2205;
  for (const char* spec : {"dct:0.9,3", "topk:4/128", "dct:0.9,3+fp8"}) {
    SCOPED_TRACE(spec);
    const bool exact = !std::string_view(spec).ends_with("+fp8");
    test::run_ranks(p, [&](Transport& t) {
      compress::ErrorFeedbackStore fused_store, alone_store;
      GradExchange fused(parse_dp_codec(spec), fused_store), alone(parse_dp_codec(spec), alone_store);
      std::vector<double> applied(n, 0.0), truth(n, 0.0);
      for (int k = 0; k < 7; ++k) {
        // Scaled per tensor, so a bucket-wide threshold would pick differently.
        auto g = test::rank_input<float>(n, t.rank(), 40 + k);
        for (std::size_t i = 700; i < 705; ++i) g[i] *= 100;
        for (std::size_t i = 705; i < n; ++i) g[i] *= 0.01f;
        for (int r = 0; r < p; ++r) {
          auto gr = test::rank_input<float>(n, r, 40 + k);
          for (std::size_t i = 0; i < n; ++i) truth[i] += gr[i] * (i >= 705 ? 0.01f : i >= 700 ? 100.0f : 1.0f) / p;
        }
        std::vector<float> h = g;
        const ExchangeStats fs = fused.exchange(t, "a+b+c", pieces, g, k);
        std::size_t off = 0, kept = 0;
        for (const auto& pc : pieces) {
          kept += alone.exchange(t, pc.name, std::span<float>(h).subspan(off, pc.size), k).kept;
          off += pc.size;
        }
        if (exact) {
          EXPECT_EQ(fs.kept, kept);
          for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(g[i], h[i]) << "step " << k << " value " << i;
        }
        for (std::size_t i = 0; i < n; ++i) applied[i] += g[i];
      }
      std::size_t off = 0;
      for (const auto& pc : pieces) {
        const auto fr = fused_store.find(pc.name), ar = alone_store.find(pc.name);
        ASSERT_EQ(fr.size(), pc.size) << pc.name;
        if (exact) {
          for (std::size_t i = 0; i < pc.size; ++i) ASSERT_EQ(fr[i], ar[i]) << pc.name << " " << i;
        }
        std::vector<float> resid(fr.begin(), fr.end());
        allreduce(t, std::span<float>(resid));
        for (std::size_t i = 0; i < pc.size; ++i)
          ASSERT_NEAR(applied[off + i] + resid[i] / p, truth[off + i], (exact ? 1e-3 : 0.3) * (pc.name == "b" ? 100 : 1))
              << pc.name;
        off += pc.size;
      }
    });
  }
}

// Selections made elsewhere (sparq.torch's codecs on a GPU): the state
// handed over tensor by tensor continues the exchange bit for bit.
TEST(GradExchange, TensorStateHandsOver) {
  const int p = 2;
  SPARQ_NEED_RANKS(p);
  const std::vector<GradExchange::Piece> pieces{{"a", 300}, {"b", 900}};
  const std::size_t n = 1200;
  for (const char* spec : {"dct:0.9,4", "topk:4/128+fp8"}) {
    SCOPED_TRACE(spec);
    test::run_ranks(p, [&](Transport& t) {
      compress::ErrorFeedbackStore whole_store, first_store, second_store;
      GradExchange whole(parse_dp_codec(spec), whole_store), first(parse_dp_codec(spec), first_store),
          second(parse_dp_codec(spec), second_store);
      for (int k = 0; k < 6; ++k) {
        auto g = test::rank_input<float>(n, t.rank(), 60 + k), h = g;
        whole.exchange(t, "a+b", pieces, g, k);
        if (k == 3) {
          for (const auto& pc : pieces) {
            const GradExchange::TensorState s = first.tensor_state(pc.name);
            ASSERT_EQ(s.residual.size(), pc.size);
            EXPECT_EQ(s.tau.has_value(), spec[0] == 'd');
            second.set_tensor_state(pc.name, s.residual, s.tau);
          }
        }
        (k < 3 ? first : second).exchange(t, "a+b", pieces, h, k);
        for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(g[i], h[i]) << "step " << k << " value " << i;
      }
      for (const auto& pc : pieces) {
        const auto w = whole.tensor_state(pc.name), s = second.tensor_state(pc.name);
        EXPECT_TRUE(std::equal(w.residual.begin(), w.residual.end(), s.residual.begin(), s.residual.end()));
        EXPECT_EQ(w.tau, s.tau);
      }
      EXPECT_FALSE(second.tensor_state("none").tau.has_value());
      EXPECT_TRUE(second.tensor_state("none").residual.empty());
      const std::vector<float> short_residual(5);
      EXPECT_THROW(second.set_tensor_state("a", short_residual, std::nullopt), InputError);
      if (spec[0] == 't') {
        EXPECT_THROW(second.set_tensor_state("a", first_store.find("a"), 1.0f), InputError);
      }

    });
  }
}

TEST(GradExchange, DctCompressesAndQuantizedStaysClose) {
  const int p = 4;
  SPARQ_NEED_RANKS(p);
  const std::size_t n = 1 << 16;
  const auto ref = test::reference_reduce<float>(n, p, ReduceOp::Sum);
  test::run_ranks(p, [&](Transport& t) {
    compress::ErrorFeedbackStore store;
    GradExchange dct(parse_dp_codec("dct:0.99,1000"), store);
    auto g = test::rank_input<float>(n, t.rank());
    const ExchangeStats s = dct.exchange(t, "w", g, 0);
    EXPECT_NEAR(static_cast<double>(s.kept), n * 0.01, 2);
    EXPECT_GE(static_cast<double>(s.dense_bytes) / static_cast<double>(s.bytes_sent), 20.0);

    GradExchange q8(parse_dp_codec("q8"), store);
    auto h = test::rank_input<float>(n, t.rank());
    q8.exchange(t, "w8", h, 0);
    // Ring: P hops of at most s/2, s <= 2 * sum|x| / 255 <= 2P/255; then / P.
    for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(h[i], ref.value[i] / p, (p * (2.0 * p / 255) / 2) / p * 1.01);
  });
}

// The quantized codecs reach the collective whole: each step's exchange is
// quantized_allreduce of the same codec (error-compensation variant
// included), divided by P, bit for bit, residuals carried over the steps.
TEST(GradExchange, QuantizedIsTheQuantizedAllreduceOverP) {
  const int p = 3;
  SPARQ_NEED_RANKS(p);
  const std::size_t n = 1500;
  for (const char* spec : {"q2+ec", "q2+ec-skip-first", "q4"}) {
    SCOPED_TRACE(spec);
    test::run_ranks(p, [&](Transport& t) {
      compress::ErrorFeedbackStore store, direct_store;
      GradExchange x(parse_dp_codec(spec, "ring"), store);
      QuantizedAllreduceOptions o;
      o.codec = parse_codec(spec);
      o.residuals = &direct_store;
      o.tensor = "w";
      for (std::uint64_t step = 0; step < 3; ++step) {
        auto g = test::rank_input<float>(n, t.rank(), 7 + step), h = g;
        x.exchange(t, "w", g, step);
        o.step = step;
        quantized_allreduce(t, std::span<float>(h), o);
        for (float& v : h) v *= 1.0f / static_cast<float>(p);
        ASSERT_EQ(0, std::memcmp(g.data(), h.data(), n * sizeof(float))) << "step " << step;
      }
    });
  }
}

// Three tables in one exchange: rank r touches rows {r, r+2, 7} of a 10 x 3
// table, every row of a 4 x 2 table (or, with `all`, every row of every
// table, so the sum comes back dense), and none of a 6 x 3 one, each value
// a function of (rank, table, row, column). Each table's result has the rows
// some rank touched, with the mean over ranks.
// A saved and reloaded codec state continues bit for bit: 6 steps in one
// exchange equal 3 steps, save_state(), a new exchange, load_state(), 3 more
// (residuals, DCT-DP's thresholds and its L-schedule, auto's plans). A state
// of another codec or a cut blob is refused.
TEST(GradExchange, SavedStateResumesBitForBit) {
  SPARQ_NEED_RANKS(3);
  const std::size_t n = 2000;
  for (const char* codec : {"dct:0.9,4", "topk:8/256", "q4+ec"}) {
    test::run_ranks(3, [&](Transport& t) {
      auto grad_at = [&](std::uint64_t step) {
        auto g = test::rank_input<float>(n, t.rank() + 10 * static_cast<int>(step));
        return g;
      };
      const GradExchange::Piece pieces[] = {{"a", 700}, {"b", 1300}};
      compress::ErrorFeedbackStore whole_store;
      GradExchange whole(parse_dp_codec(codec), whole_store);
      std::vector<std::vector<float>> expect;
      for (std::uint64_t s = 0; s < 6; ++s) {
        auto g = grad_at(s);
        whole.exchange(t, "bucket", pieces, g, s);
        expect.push_back(g);
      }
      std::vector<std::byte> blob;
      {
        compress::ErrorFeedbackStore store;
        GradExchange first(parse_dp_codec(codec), store);
        for (std::uint64_t s = 0; s < 3; ++s) {
          auto g = grad_at(s);
          first.exchange(t, "bucket", pieces, g, s);
        }
        blob = first.save_state();
      }
      compress::ErrorFeedbackStore store;
      GradExchange resumed(parse_dp_codec(codec), store);
      resumed.load_state(blob);
      for (std::uint64_t s = 3; s < 6; ++s) {
        auto g = grad_at(s);
        resumed.exchange(t, "bucket", pieces, g, s);
        ASSERT_EQ(g, expect[s]) << codec << " step " << s;
      }
      compress::ErrorFeedbackStore other_store;
      GradExchange other(parse_dp_codec("dct:0.5,4"), other_store);
      EXPECT_THROW(other.load_state(blob), InputError);
      EXPECT_THROW(resumed.load_state(std::span(blob).first(blob.size() - 3)), InputError);
    });
  }
}

// On fewer ranks the saved states fold: new rank j's residuals are saved
// rank j's plus those of saved ranks j + P', j + 2P', ... (added in that
// order, as the reference here does), its thresholds saved rank j's.
TEST(GradExchange, StateFoldsOntoFewerRanks) {
  SPARQ_NEED_RANKS(4);
  if (test::under_mpi()) GTEST_SKIP() << "the ranks' states are gathered in one process";
  const std::size_t n = 2000;
  const GradExchange::Piece pieces[] = {{"a", 700}, {"b", 1300}};
  for (const char* codec : {"dct:0.9,4", "topk:8/256"}) {
    SCOPED_TRACE(codec);
    std::vector<std::vector<std::byte>> saved(4);
    struct Kept {
      std::vector<float> residual;
      std::optional<float> tau;
    };
    std::vector<std::map<std::string, Kept>> state(4);
    test::run_ranks(4, [&](Transport& t) {
      compress::ErrorFeedbackStore store;
      GradExchange x(parse_dp_codec(codec), store);
      for (std::uint64_t s = 0; s < 3; ++s) {
        auto g = test::rank_input<float>(n, t.rank() + 10 * static_cast<int>(s));
        x.exchange(t, "bucket", pieces, g, s);
      }
      const auto r = static_cast<std::size_t>(t.rank());
      saved[r] = x.save_state();
      for (const auto& pc : pieces) {
        const auto st = x.tensor_state(pc.name);
        state[r][pc.name] = {{st.residual.begin(), st.residual.end()}, st.tau};
      }
    });
    for (std::size_t ranks : {1, 2, 3}) {
      for (std::size_t j = 0; j < ranks; ++j) {
        compress::ErrorFeedbackStore store;
        GradExchange x(parse_dp_codec(codec), store);
        x.load_state(GradExchange::repartition_state(saved, j, ranks));
        for (const auto& pc : pieces) {
          std::vector<float> expect = state[j][pc.name].residual;
          for (std::size_t r = j + ranks; r < 4; r += ranks)
            for (std::size_t i = 0; i < expect.size(); ++i) expect[i] += state[r][pc.name].residual[i];
          const auto got = x.tensor_state(pc.name).residual;
          EXPECT_EQ(std::vector<float>(got.begin(), got.end()), expect) << ranks << " ranks, rank " << j << ", " << pc.name;
          EXPECT_EQ(x.tensor_state(pc.name).tau, state[j][pc.name].tau);
        }
      }
    }
    EXPECT_THROW(GradExchange::repartition_state(saved, 0, 4), Error);  // not fewer
    auto mixed = saved;
    {
      compress::ErrorFeedbackStore store;
      mixed[3] = GradExchange(parse_dp_codec("dct:0.5,4"), store).save_state();
    }
    EXPECT_THROW(GradExchange::repartition_state(mixed, 0, 3), InputError);
  }
}

// 3 replicas x 2 stages onto 2 x 2 and 1 x 2: each rank's exchange state is
// its stage's, folded over the replicas as a data-parallel run's (checked
// above against a plain sum); the cuts' residuals are dropped.
TEST(Hybrid, StateFoldsOntoFewerReplicas) {
  SPARQ_NEED_RANKS(3);
  if (test::under_mpi()) GTEST_SKIP() << "the ranks' states are gathered in one process";
  const std::size_t stages = 2, n = 600;
  const GradExchange::Piece pieces[] = {{"w", n}};
  std::vector<std::vector<std::byte>> exchange(6), saved(6);
  for (std::size_t m = 0; m < stages; ++m)  // each stage's replicas exchange among themselves
    test::run_ranks(3, [&](Transport& t) {
      compress::ErrorFeedbackStore store;
      GradExchange x(parse_dp_codec("dct:0.9,4"), store);
      for (std::uint64_t s = 0; s < 3; ++s) {
        auto g = test::rank_input<float>(n, t.rank() + 10 * static_cast<int>(s + 7 * m));
        x.exchange(t, "bucket", pieces, g, s);
      }
      exchange[static_cast<std::size_t>(t.rank()) * stages + m] = x.save_state();
    });
  for (std::size_t s = 0; s < saved.size(); ++s) {
    BlobWriter w;
    w.str("sparq hybrid state 2");
    w.bytes(exchange[s]);
    w.u64(1);
    w.floats(std::vector<float>(8, static_cast<float>(s)));  // a cut's residual
    saved[s] = w.take();
  }
  for (std::size_t ranks : {4, 2}) {
    for (std::size_t j = 0; j < ranks; ++j) {
      const std::vector<std::vector<std::byte>> stage = {exchange[j % stages], exchange[j % stages + 2],
                                                         exchange[j % stages + 4]};
      const auto got = Hybrid::repartition_state(saved, j, ranks, stages);
      BlobReader r(got, "folded");
      EXPECT_EQ(r.str(), "sparq hybrid state 2");
      EXPECT_EQ(r.bytes(), GradExchange::repartition_state(stage, j / stages, ranks / stages)) << ranks << " " << j;
      EXPECT_EQ(r.u64(), 0u);  // no residuals at the cuts
      r.expect_end();
    }
  }
  EXPECT_THROW(Hybrid::repartition_state(saved, 0, 6, stages), Error);  // not fewer
  EXPECT_THROW(Hybrid::repartition_state(saved, 0, 3, stages), Error);  // not whole replicas
  auto other = saved;
  BlobWriter w;
  w.str("sparq data parallel state 2");
  other[2] = w.take();
  EXPECT_THROW(Hybrid::repartition_state(other, 0, 4, stages), InputError);
}

TEST(EmbeddingGradExchange, AveragesRowSparseGradientsOfSeveralTables) {
  const std::size_t rows[3] = {10, 4, 6}, dims[3] = {3, 2, 3};
  auto touched = [&](int r, std::size_t tb, bool all) {
    std::set<std::uint32_t> s;
    if (all || tb == 1)
      for (std::uint32_t x = 0; x < rows[tb]; ++x) s.insert(x);
    else if (tb == 0)
      s = {static_cast<std::uint32_t>(r), static_cast<std::uint32_t>(r + 2), 7};
    return s;
  };
  auto value = [](int r, std::size_t tb, std::uint32_t row, std::size_t j) {
    return static_cast<float>(r + 1) + 0.5f * j + 0.25f * row + 10.0f * tb;
  };
  for (bool all : {false, true})
    for (int p : {1, 2, 3, 4}) {
      if (!test::ranks_available(p)) continue;
      test::run_ranks(p, [&](Transport& t) {
        SparseGrad<float> g[3];
        std::vector<EmbGradRef> refs;
        for (std::size_t tb = 0; tb < 3; ++tb) {
          g[tb].dim = dims[tb];
          for (std::uint32_t row : touched(t.rank(), tb, all)) {
            g[tb].rows.push_back(row);
            for (std::size_t j = 0; j < dims[tb]; ++j) g[tb].values.push_back(value(t.rank(), tb, row, j));
          }
          refs.push_back({&g[tb], rows[tb], dims[tb]});
        }
        const ExchangeStats st = exchange_embedding_grads(t, refs, 0);
        EXPECT_EQ(st.values, 10u * 3 + 4 * 2 + 6 * 3);
        // The baseline: this rank's touched rows, a 4-byte index and dim fp32
        // values each, allgathered to the p - 1 others.
        std::uint64_t allgather = 0;
        for (std::size_t tb = 0; tb < 3; ++tb) allgather += touched(t.rank(), tb, all).size() * 4 * (1 + dims[tb]);
        EXPECT_EQ(st.dense_bytes, static_cast<std::uint64_t>(p - 1) * allgather);
        for (std::size_t tb = 0; tb < 3; ++tb) {
          std::vector<double> expect(rows[tb] * dims[tb], 0.0);
          std::set<std::uint32_t> any;
          for (int r = 0; r < p; ++r)
            for (std::uint32_t row : touched(r, tb, all)) {
              any.insert(row);
              for (std::size_t j = 0; j < dims[tb]; ++j) expect[row * dims[tb] + j] += value(r, tb, row, j) / p;
            }
          ASSERT_EQ(std::set<std::uint32_t>(g[tb].rows.begin(), g[tb].rows.end()), any) << "table " << tb;
          ASSERT_EQ(g[tb].values.size(), g[tb].rows.size() * dims[tb]);
          for (std::size_t i = 0; i < g[tb].rows.size(); ++i)
            for (std::size_t j = 0; j < dims[tb]; ++j)
              EXPECT_NEAR(g[tb].values[i * dims[tb] + j], expect[g[tb].rows[i] * dims[tb] + j], 1e-5);
        }
      });
    }
}

TEST(VerifyReplicas, PassesWhenEqualAndNamesTheStepWhenNot) {
  for (int p : {2, 3}) {
    if (!test::ranks_available(p)) continue;
    test::run_ranks(p, [&](Transport& t) {
      std::vector<float> w(100, 0.5f);
      verify_replicas(t, w, 1);
      if (t.rank() == p - 1) w[42] = std::nextafter(0.5f, 1.0f);  // one ulp on one rank
      try {
        verify_replicas(t, w, 7);
        ADD_FAILURE() << "no error";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("diverged at step 7"), std::string::npos) << e.what();
      }
    });
  }
}

}  // namespace
}  // namespace sparq
