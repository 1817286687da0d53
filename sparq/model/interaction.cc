#include "sparq/model/interaction.h"

#include <algorithm>

namespace sparq {

template <class T>
void DotInteraction<T>::forward(const T* v, std::size_t batch, T* out) const {
  const std::size_t n = n_, d = d_, w = out_width();
  for (std::size_t b = 0; b < batch; ++b) {
    const T* V = v + b * n * d;
    T* o = out + b * w;
    std::copy(V, V + d, o);
    std::size_t p = d;
    for (std::size_t i = 1; i < n; ++i) {
      const T* vi = V + i * d;
      for (std::size_t j = 0; j < i; ++j) {
        const T* vj = V + j * d;
        T s = T(0);
        for (std::size_t k = 0; k < d; ++k) s += vi[k] * vj[k];
        o[p++] = s;
      }
    }
  }
}

// dv_0 = dout[0:d]; for each pair (i, j), g = dout[p]: dv_i += g v_j, dv_j += g v_i.
template <class T>
void DotInteraction<T>::backward(const T* v, const T* dout, std::size_t batch, T* dv) const {
  const std::size_t n = n_, d = d_, w = out_width();
  for (std::size_t b = 0; b < batch; ++b) {
    const T* V = v + b * n * d;
    const T* g = dout + b * w;
    T* dV = dv + b * n * d;
    std::copy(g, g + d, dV);
    std::fill(dV + d, dV + n * d, T(0));
    std::size_t p = d;
    for (std::size_t i = 1; i < n; ++i) {
      const T* vi = V + i * d;
      T* dvi = dV + i * d;
      for (std::size_t j = 0; j < i; ++j) {
        const T* vj = V + j * d;
        T* dvj = dV + j * d;
        const T gp = g[p++];
        for (std::size_t k = 0; k < d; ++k) {
          dvi[k] += gp * vj[k];
          dvj[k] += gp * vi[k];
        }
      }
    }
  }
}

template class DotInteraction<float>;
template class DotInteraction<double>;

}  // namespace sparq
