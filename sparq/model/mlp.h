#pragma once
// A multilayer perceptron of fully connected layers on BLAS, each followed by
// ReLU (optionally not the last one: DLRM's top MLP ends in a logit).
//
// Cutting: an Mlp may hold any contiguous range [first, last) of the layers of
// an MLP spec. The model-parallel trainer places such stages on different
// ranks; the activation that leaves stage k enters stage k+1, and the
// gradient w.r.t. it goes back. Each layer is initialised from its own random
// stream keyed by its global index, so stages built separately from the same
// seed hold exactly the parameters of the uncut MLP, and a forward/backward
// across a cut computes bit-for-bit what the uncut MLP computes.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "sparq/model/blas.h"
#include "sparq/model/dense_params.h"

namespace sparq {

struct MlpSpec {
  std::vector<std::size_t> dims;  // dims[0] = input width, dims[l+1] = output of layer l
  bool relu_last = true;          // ReLU after the last layer too?
  GemmPrecision precision = GemmPrecision::fp32;  // of the layers' GEMMs (bf16: float only)
  std::size_t num_layers() const { return dims.empty() ? 0 : dims.size() - 1; }
};

template <class T>
class Mlp {
 public:
  static constexpr std::size_t kAll = std::numeric_limits<std::size_t>::max();

  // Registers the parameters of layers [first, last) of `spec` in `store`
  // as "<prefix>.<global layer>.weight" [out x in] and ".bias" [out].
  // Throws InputError for bf16 where the CPU cannot (bf16_gemm_unavailable).
  Mlp(const MlpSpec& spec, DenseParams<T>& store, const std::string& prefix, std::size_t first = 0,
      std::size_t last = kAll);

  // The reference DLRM's initialisation: W ~ N(0, sqrt(2/(fan_in+fan_out))),
  // b ~ N(0, sqrt(1/fan_out)); layer l draws from Rng(seed, stream_base + l).
  void init(std::uint64_t seed, std::uint64_t stream_base);

  // What one forward pass keeps for its backward: the input and every
  // layer's output, plus scratch. A pipeline stage keeps one tape per
  // micro-batch in flight; plain training uses the Mlp's own.
  struct Tape {
    std::size_t batch = 0;
    const T* x = nullptr;
    std::vector<std::vector<T>> acts;    // acts[l] = output of layer l, [B x out_l]
    std::vector<std::vector<T>> dx;      // per layer: input gradient (below the top, reused as dz)
    std::vector<T> dz;                   // the top layer's ReLU-masked gradient
    std::vector<T> db;                   // bias gradient scratch when accumulating
    // bf16 MLPs: each layer's input and weights as its forward rounded them
    // (empty where it multiplied in fp32), read again by its backward; and
    // the layer's output gradient, rounded once for both backward products.
    std::vector<Bf16Matrix> x16, w16;
    Bf16Matrix dz16;
  };

  // x [B x in] -> y [B x out]. x must stay valid and unchanged until
  // backward() (it is the input of the first layer's weight gradient).
  // The returned pointer is valid until the next forward() on the tape.
  const T* forward(const T* x, std::size_t batch) { return forward(x, batch, tape_); }
  const T* forward(const T* x, std::size_t batch, Tape& tape) const;

  // dy [B x out] -> writes (overwrites) every weight and bias gradient of this
  // stage in the store; returns dx [B x in] if want_dx, else nullptr (the
  // first layer of a model has no use for it and skips one GEMM).
  const T* backward(const T* dy, bool want_dx) { return backward(dy, want_dx, tape_, false, true); }
  // The same for the forward pass recorded on `tape`; with `accumulate` the
  // gradients are added to the store's (micro-batches of one step), and
  // `notify` calls the grad hook (on a step's last backward).
  const T* backward(const T* dy, bool want_dx, Tape& tape, bool accumulate, bool notify);

  // Called by backward() as soon as a layer's gradients are final, with the
  // store's view indices of its weight and bias (last layer first): data
  // parallelism starts exchanging them while the earlier layers compute.
  using GradHook = std::function<void(std::size_t w_view, std::size_t b_view)>;
  void set_grad_hook(GradHook h) { hook_ = std::move(h); }

  std::size_t in_dim() const { return in_dim_; }
  std::size_t out_dim() const { return out_dim_; }
  std::size_t num_layers() const { return layers_.size(); }
  // Multiply-adds of one sample's forward pass (backward is twice that).
  std::size_t macs_per_sample() const;

 private:
  struct Layer {
    std::size_t global = 0;  // index in the uncut MLP
    std::size_t in = 0, out = 0;
    bool relu = true;
    std::size_t w = 0, b = 0;  // view indices in the store
  };
  // C [m x n] = op(A) op(B) + beta C, every matrix contiguous. In bf16 (a
  // bf16 MLP, bf16_product(m, n)) on a16 and b16, each rounded from its
  // operand here only if still empty; otherwise in T.
  void product(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, const T* a, Bf16Matrix& a16,
               const T* b, Bf16Matrix& b16, T beta, T* c) const;
  DenseParams<T>* store_;
  GemmPrecision precision_;
  std::size_t in_dim_ = 0, out_dim_ = 0;  // dims[first], dims[last] (an empty stage passes through)
  std::vector<Layer> layers_;
  Tape tape_;
  GradHook hook_;
};

}  // namespace sparq
