#include "sparq/model/bf16_matmul.h"

#include <immintrin.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <compare>
#include <cstdint>
#include <map>
#include <vector>

#include "sparq/core/error.h"
#include "sparq/model/blas.h"
#include "sparq/model/parallel.h"

namespace sparq {

// oneDNN would run bf16 on a CPU without AVX512_BF16 too, by emulation,
// slower than fp32: sparq refuses instead.
std::string bf16_gemm_unavailable() {
  if (!cpu_isa().avx512_bf16)
    return "this CPU has no AVX512_BF16 instructions (oneDNN would emulate bf16 there, slower than fp32)";
  return "";
}

namespace {

// rows x cols of a row-major float matrix with leading dimension ld -> a
// contiguous bf16 matrix, rounded to nearest even by VCVTNEPS2BF16 (NaN stays
// NaN). Only reached after bf16_gemm_unavailable() said yes (Mlp's constructor).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void to_bf16(const float* src, std::size_t rows,
                                                                            std::size_t cols, std::size_t ld,
                                                                            std::uint16_t* dst) {
  for (std::size_t r = 0; r < rows; ++r, src += ld, dst += cols) {
    std::size_t j = 0;
    for (; j + 16 <= cols; j += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + j), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + j)));
    if (j < cols) {
      const auto tail = static_cast<__mmask16>((1u << (cols - j)) - 1);
      _mm256_mask_storeu_epi16(dst + j, tail, (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(tail, src + j)));
    }
  }
}

struct Shape {
  std::size_t m, n, k, lda, ldb, ldc;
  bool trans_a, trans_b;
  float alpha, beta;
  auto operator<=>(const Shape&) const = default;
};

struct Primitive {
  dnnl::memory::desc a, b, c;
  dnnl::matmul matmul;
};

// Per calling thread: oneDNN's engine and stream, one primitive per shape
// (a model has a dozen).
struct Context {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<Shape, Primitive> primitives;
};

Primitive make_primitive(const Shape& s, const dnnl::engine& engine) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  const auto d = [](std::size_t x) { return static_cast<dnnl::memory::dim>(x); };
  // A is [m x k] in memory, or [k x m] when transposed; B is [k x n], or
  // [n x k]; rows lda and ldb apart.
  const dnnl::memory::desc a({d(s.m), d(s.k)}, dt::bf16, s.trans_a ? dims{1, d(s.lda)} : dims{d(s.lda), 1});
  const dnnl::memory::desc b({d(s.k), d(s.n)}, dt::bf16, s.trans_b ? dims{1, d(s.ldb)} : dims{d(s.ldb), 1});
  const dnnl::memory::desc c({d(s.m), d(s.n)}, dt::f32, dims{d(s.ldc), 1});
  dnnl::primitive_attr attr;
  if (s.alpha != 1.0f) attr.set_output_scales(0, {s.alpha});
  if (s.beta != 0.0f) {
    dnnl::post_ops ops;
    ops.append_sum(s.beta);
    attr.set_post_ops(ops);
  }
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, engine);
  // oneDNN's reference kernels would run, correctly but many times slower
  // than fp32: refuse, as for a CPU without bf16 instructions.
  const std::string impl = pd.impl_info_str();
  SPARQ_CHECK(impl.rfind("ref", 0) != 0, "oneDNN has only its reference kernel ({}) for a bf16 {}x{}x{} product", impl,
              s.m, s.n, s.k);
  return {a, b, c, dnnl::matmul(pd)};
}

}  // namespace

void round_to_bf16(const float* src, std::size_t rows, std::size_t cols, std::size_t ld, Bf16Matrix& out) {
  if (out.v.size() < rows * cols) out.v.resize(rows * cols);
  out.rows = rows, out.cols = cols;
  // Blocks of rows over the compute pool once a block holds 2^15 values.
  parallel_for(rows, std::max<std::size_t>(1, (std::size_t{1} << 15) / std::max<std::size_t>(cols, 1)),
               [&](std::size_t r0, std::size_t r1) {
                 to_bf16(src + r0 * ld, r1 - r0, cols, ld, out.v.data() + r0 * cols);
               });
}

void bf16_matmul(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, float alpha,
                 const std::uint16_t* a, std::size_t lda, const std::uint16_t* b, std::size_t ldb, float beta,
                 float* c, std::size_t ldc) {
  // One OpenMP thread per calling thread: the split over threads is ours (blas.cc).
  thread_local const bool one_thread = (omp_set_num_threads(1), true);
  (void)one_thread;
  thread_local Context ctx;
  const Shape s{m, n, k, lda, ldb, ldc, trans_a, trans_b, alpha, beta};
  try {
    auto it = ctx.primitives.find(s);
    if (it == ctx.primitives.end()) it = ctx.primitives.emplace(s, make_primitive(s, ctx.engine)).first;
    const Primitive& p = it->second;
    // oneDNN only reads a source and weights memory, whose handle is not const.
    dnnl::memory ma(p.a, ctx.engine, const_cast<std::uint16_t*>(a)),
        mb(p.b, ctx.engine, const_cast<std::uint16_t*>(b)), mc(p.c, ctx.engine, c);
    p.matmul.execute(ctx.stream, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
    ctx.stream.wait();
  } catch (const dnnl::error& e) {
    SPARQ_THROW(Error, "oneDNN bf16 matmul {}x{}x{} (trans {}{}) failed: {}", m, n, k, trans_a ? 'T' : 'N',
                trans_b ? 'T' : 'N', e.what());
  }
}

}  // namespace sparq
