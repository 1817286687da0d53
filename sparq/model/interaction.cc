#include "sparq/model/interaction.h"

#include "sparq/core/error.h"
#include "sparq/core/kernel_costs.h"
#include "sparq/model/kernels.h"
#include "sparq/model/parallel.h"

namespace sparq {

template <class T>
DotInteraction<T>::DotInteraction(std::size_t num_vectors, std::size_t dim) : n_(num_vectors), d_(dim) {
  SPARQ_CHECK(n_ >= 1 && n_ <= 64 && d_ >= 1 && d_ <= 64,
              "dot interaction supports 1..64 vectors of width 1..64 (got {} x {})", n_, d_);
}

// v [B x n x d] -> out [B x (d + n(n-1)/2)]: out = [v_0, <v_i, v_j> for i > j, i outer]
template <class T>
void DotInteraction<T>::forward(const T* v, std::size_t batch, T* out) const {
  const std::size_t in = in_width(), w = out_width();
  parallel_for(batch, 32, [&](std::size_t b0, std::size_t b1) {  // samples are independent
    const ChargedKernel charged("interaction_fwd", b1 - b0, n_, d_, sizeof(T));
    kernels::interaction_fwd(v + b0 * in, b1 - b0, n_, d_, out + b0 * w);
  });
}

// dout [B x w] -> dv [B x n x d]: dv_0 = dout[0:d]; pair (i, j) with gradient g adds
// g v_j to dv_i and g v_i to dv_j.
template <class T>
void DotInteraction<T>::backward(const T* v, const T* dout, std::size_t batch, T* dv) const {
  const std::size_t in = in_width(), w = out_width();
  parallel_for(batch, 32, [&](std::size_t b0, std::size_t b1) {
    const ChargedKernel charged("interaction_bwd", b1 - b0, n_, d_, sizeof(T));
    kernels::interaction_bwd(v + b0 * in, dout + b0 * w, b1 - b0, n_, d_, dv + b0 * in);
  });
}

template class DotInteraction<float>;
template class DotInteraction<double>;

}  // namespace sparq
