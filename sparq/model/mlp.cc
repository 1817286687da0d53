#include "sparq/model/mlp.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "sparq/core/error.h"
#include "sparq/core/kernel_costs.h"
#include "sparq/core/rng.h"
#include "sparq/model/blas.h"
#include "sparq/model/kernels.h"
#include "sparq/model/parallel.h"

namespace sparq {

// Element-wise passes go to the thread pool only from this many elements per
// thread: below it a fork-join costs more than the pass.
constexpr std::size_t kMinSplit = std::size_t{1} << 15;

template <class T>
Mlp<T>::Mlp(const MlpSpec& spec, DenseParams<T>& store, const std::string& prefix, std::size_t first,
            std::size_t last)
    : store_(&store), precision_(spec.precision) {
  if (precision_ == GemmPrecision::bf16) {
    SPARQ_CHECK_AS(InputError, (std::is_same_v<T, float>), "bf16 GEMMs need a float model");
    const std::string why = bf16_gemm_unavailable();
    SPARQ_CHECK_AS(InputError, why.empty(), "bf16 MLPs cannot run here: {}", why);
  }
  const std::size_t n = spec.num_layers();
  if (last == kAll) last = n;
  SPARQ_CHECK(first <= last && last <= n, "layer range [{}, {}) of an MLP with {} layers", first, last, n);
  in_dim_ = spec.dims[first];
  out_dim_ = spec.dims[last];
  for (std::size_t l = first; l < last; ++l) {
    Layer L;
    L.global = l;
    L.in = spec.dims[l];
    L.out = spec.dims[l + 1];
    SPARQ_CHECK(L.in > 0 && L.out > 0, "MLP layer {} has a zero width ({} -> {})", l, L.in, L.out);
    L.relu = (l + 1 < n) || spec.relu_last;
    L.w = store.add(prefix + "." + std::to_string(l) + ".weight", L.out * L.in);
    L.b = store.add(prefix + "." + std::to_string(l) + ".bias", L.out);
    layers_.push_back(L);
  }
}

template <class T>
void Mlp<T>::init(std::uint64_t seed, std::uint64_t stream_base) {
  for (const auto& L : layers_) {
    Rng rng(seed, stream_base + L.global);
    const double w_std = std::sqrt(2.0 / static_cast<double>(L.in + L.out));
    const double b_std = std::sqrt(1.0 / static_cast<double>(L.out));
    for (auto& w : store_->param(L.w)) w = static_cast<T>(rng.normal(0.0, w_std));
    for (auto& b : store_->param(L.b)) b = static_cast<T>(rng.normal(0.0, b_std));
  }
}

template <class T>
std::size_t Mlp<T>::macs_per_sample() const {
  std::size_t m = 0;
  for (const auto& L : layers_) m += L.in * L.out;
  return m;
}

template <class T>
void Mlp<T>::product(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, const T* a,
                     Bf16Matrix& a16, const T* b, Bf16Matrix& b16, T beta, T* c) const {
  const std::size_t lda = trans_a ? m : k, ldb = trans_b ? k : n;
  if constexpr (std::is_same_v<T, float>) {
    if (precision_ == GemmPrecision::bf16 && bf16_product(m, n)) {
      if (a16.empty()) round_to_bf16(a, trans_a ? k : m, lda, lda, a16);
      if (b16.empty()) round_to_bf16(b, trans_b ? n : k, ldb, ldb, b16);
      return gemm_bf16(trans_a, trans_b, m, n, k, 1.0f, a16, b16, beta, c, n);
    }
  }
  gemm<T>(trans_a, trans_b, m, n, k, T(1), a, lda, b, ldb, beta, c, n);
}

// Layer l, forward:  x [B x in], W [out x in], b [out]
//   y = x W^T            [B x out]   (GEMM, beta = 0)
//   y = max(y + b, 0)    one fused pass (without the max when !relu)
template <class T>
const T* Mlp<T>::forward(const T* x, std::size_t batch, Tape& tape) const {
  tape.batch = batch;
  tape.x = x;
  tape.acts.resize(layers_.size());
  tape.x16.resize(layers_.size());
  tape.w16.resize(layers_.size());
  const T* in = x;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const Layer& L = layers_[i];
    auto& y = tape.acts[i];
    y.resize(batch * L.out);
    tape.x16[i].clear();
    tape.w16[i].clear();
    product(false, true, batch, L.out, L.in, in, tape.x16[i], store_->param(L.w).data(), tape.w16[i], T(0), y.data());
    {
      const ChargedKernel charged("bias_act", batch, L.out, L.relu, sizeof(T));
      kernels::bias_act(y.data(), store_->param(L.b).data(), batch, L.out, L.relu);
    }
    in = y.data();
  }
  return in;
}

// Layer l, backward:  dy [B x out] (w.r.t. the layer's output, after ReLU)
//   dz = dy * [y > 0]    [B x out]   if relu (y is the stored output)
//   dW = dz^T x          [out x in]  (+= when accumulating)
//   db = sum_rows dz     [out]       (+= when accumulating)
//   dx = dz W            [B x in]    (skipped for the first layer unless asked)
template <class T>
const T* Mlp<T>::backward(const T* dy, bool want_dx, Tape& tape, bool accumulate, bool notify) {
  const std::size_t B = tape.batch;
  const T* g = dy;
  if (layers_.empty()) return want_dx ? dy : nullptr;
  SPARQ_CHECK(tape.acts.size() == layers_.size(), "MLP backward without a forward on this tape");
  tape.dx.resize(layers_.size());
  for (std::size_t i = layers_.size(); i-- > 0;) {
    const Layer& L = layers_[i];
    const T* x = i == 0 ? tape.x : tape.acts[i - 1].data();
    const auto& y = tape.acts[i];
    const T* dz = g;
    const std::span<T> bias_grad = store_->grad(L.b);
    if (accumulate) tape.db.resize(L.out);
    T* db = accumulate ? tape.db.data() : bias_grad.data();
    if (L.relu) {  // mask and bias gradient in one pass
      // dz overwrites g: below the last layer g is this tape's dx of the
      // layer above, needed for nothing else; the caller's dy (the last
      // layer's g, narrow where a ReLU ends an MLP) is copied first.
      T* dzp = g == dy ? (tape.dz.assign(g, g + B * L.out), tape.dz.data()) : tape.dx[i + 1].data();
      // Column blocks (each column still summed over the rows in order); split
      // only when each thread gets >= kMinSplit elements.
      parallel_for(L.out, std::max<std::size_t>(16, kMinSplit / std::max<std::size_t>(B, 1)),
                   [&](std::size_t c0, std::size_t c1) {
                     const ChargedKernel charged("relu_grad_colsum", B, c1 - c0, L.out, sizeof(T));
                     kernels::relu_grad_colsum(y.data() + c0, dzp + c0, db + c0, B, c1 - c0, L.out);
                   });
      dz = dzp;
    } else {
      const ChargedKernel charged("colsum", B, L.out, sizeof(T));
      kernels::colsum(dz, db, B, L.out);
    }
    if (accumulate)
      for (std::size_t j = 0; j < L.out; ++j) bias_grad[j] += db[j];
    tape.dz16.clear();
    product(true, false, L.out, L.in, B, dz, tape.dz16, x, tape.x16[i], accumulate ? T(1) : T(0),
            store_->grad(L.w).data());
    if (hook_ && notify) hook_(L.w, L.b);
    if (i == 0 && !want_dx) return nullptr;
    // One buffer per layer (not a ping-pong pair): each keeps its size from
    // step to step, so no re-growth and zero-fill per call.
    std::vector<T>& dx_buf = tape.dx[i];
    dx_buf.resize(B * L.in);
    product(false, false, B, L.in, L.out, dz, tape.dz16, store_->param(L.w).data(), tape.w16[i], T(0), dx_buf.data());
    g = dx_buf.data();
  }
  return g;
}

template class Mlp<float>;
template class Mlp<double>;

}  // namespace sparq
