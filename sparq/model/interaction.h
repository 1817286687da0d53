#pragma once
// DLRM's pairwise dot-product interaction. The bottom-MLP output x and the m
// pooled embeddings e_1..e_m (all of width d) are stacked per sample as the
// rows of V = [x; e_1; ...; e_m] ((m+1) x d). The output is x concatenated
// with the strictly lower triangle of V V^T, row by row:
//   out = [x, <v1,v0>, <v2,v0>, <v2,v1>, <v3,v0>, ...]   width d + (m+1)m/2
// (the reference's order: pairs (i, j) with j < i, i outer).
#include <cstddef>

namespace sparq {

template <class T>
class DotInteraction {
 public:
  DotInteraction(std::size_t num_vectors, std::size_t dim);  // both 1..64

  std::size_t in_width() const { return n_ * d_; }                // per sample
  std::size_t out_width() const { return d_ + n_ * (n_ - 1) / 2; }  // per sample

  // v [B x n x d] -> out [B x out_width]
  void forward(const T* v, std::size_t batch, T* out) const;
  // dout [B x out_width], v as in forward -> dv [B x n x d] (overwritten)
  void backward(const T* v, const T* dout, std::size_t batch, T* dv) const;

 private:
  std::size_t n_, d_;
};

}  // namespace sparq
