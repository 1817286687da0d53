#pragma once
// The element-wise and small-matrix loops of the layers (everything that is
// not a GEMM), as plain functions over raw arrays. The float versions are
// compiled for several instruction sets (x86-64-v4: AVX-512; x86-64-v3: AVX2
// and FMA; baseline x86-64) with GCC's target_clones and picked once at load
// time by the instruction sets the CPU reports: the library stays portable
// while the hot loops use the machine's vector width. (Clones named after a
// CPU model, arch=skylake-avx512, are picked only on that exact model: every
// AMD and every later Intel CPU ran the baseline SSE2 loops.) The double
// versions (gradient checks) are plain.
//
// Loops are written so the compiler can vectorise them without reassociating
// floating-point sums (no -ffast-math): reductions run across independent
// outputs (columns, pairs), never along one dot product, so the summation
// order is the written one and results are bitwise repeatable.
#include <cstddef>

namespace sparq::kernels {

// y[r, c] = act(y[r, c] + b[c]); act = ReLU or identity.      y [rows x cols]
void bias_act(float* y, const float* b, std::size_t rows, std::size_t cols, bool relu);
void bias_act(double* y, const double* b, std::size_t rows, std::size_t cols, bool relu);

// g = g * [y > 0] (in place: g becomes dz); db[c] = sum_r dz[r, c] in row
// order (db overwritten). All [rows x cols] with row stride ld (a column
// block of a wider matrix).
void relu_grad_colsum(const float* y, float* g, float* db, std::size_t rows, std::size_t cols, std::size_t ld);
void relu_grad_colsum(const double* y, double* g, double* db, std::size_t rows, std::size_t cols, std::size_t ld);

// db[c] = sum_r g[r, c]  (db overwritten)
void colsum(const float* g, float* db, std::size_t rows, std::size_t cols);
void colsum(const double* g, double* db, std::size_t rows, std::size_t cols);

// Dot interaction of B samples, each V = n x d (interaction.h for the layout).
void interaction_fwd(const float* v, std::size_t batch, std::size_t n, std::size_t d, float* out);
void interaction_fwd(const double* v, std::size_t batch, std::size_t n, std::size_t d, double* out);
void interaction_bwd(const float* v, const float* dout, std::size_t batch, std::size_t n, std::size_t d, float* dv);
void interaction_bwd(const double* v, const double* dout, std::size_t batch, std::size_t n, std::size_t d, double* dv);

// p[i] -= a * g[i]
void sub_scaled(float* p, const float* g, float a, std::size_t n);
void sub_scaled(double* p, const double* g, double a, std::size_t n);

// Adagrad, in PyTorch's order of operations:
//   s[i] += g[i]^2;  p[i] -= lr * (g[i] / (sqrt(s[i]) + eps))
void adagrad(float* p, const float* g, float* s, float lr, float eps, std::size_t n);
void adagrad(double* p, const double* g, double* s, double lr, double eps, std::size_t n);

// Adam, in PyTorch's order of operations (c1 = 1 - beta1, c2 = 1 - beta2,
// step = lr / (1 - beta1^t), bc2 = sqrt(1 - beta2^t)):
//   m = m * beta1 + c1 * g;  v = v * beta2 + c2 * g^2;  p -= step * (m / (sqrt(v) / bc2 + eps))
struct AdamCoeffs {
  double beta1, c1, beta2, c2, step, bc2, eps;
};
void adam(float* p, const float* g, float* m, float* v, const AdamCoeffs& k, std::size_t n);
void adam(double* p, const double* g, double* m, double* v, const AdamCoeffs& k, std::size_t n);

}  // namespace sparq::kernels
