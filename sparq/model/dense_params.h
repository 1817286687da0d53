#pragma once
// Parameters and gradients of the dense part of a model (the MLPs) in ONE
// contiguous buffer each, with a named view per tensor ("bot.0.weight").
// A fused allreduce of all gradients is then one call on grads(), and
// per-layer compression (DCT-DP) works on a view, never a copy.
//
// Views are addressed by index, not pointer: add() may grow the buffers, so
// layers keep the index and ask for the span when they run.
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sparq {

struct ParamView {
  std::string name;
  std::size_t offset = 0;  // elements from the start of the buffer
  std::size_t size = 0;    // elements
};

template <class T>
class DenseParams {
 public:
  // Appends a zero-initialised tensor of `size` elements; returns its index.
  std::size_t add(std::string name, std::size_t size);

  std::span<T> param(std::size_t i) { return {params_.data() + views_[i].offset, views_[i].size}; }
  std::span<const T> param(std::size_t i) const { return {params_.data() + views_[i].offset, views_[i].size}; }
  std::span<T> grad(std::size_t i) { return {grads_.data() + views_[i].offset, views_[i].size}; }
  std::span<const T> grad(std::size_t i) const { return {grads_.data() + views_[i].offset, views_[i].size}; }

  std::span<T> params() { return params_; }
  std::span<const T> params() const { return params_; }
  std::span<T> grads() { return grads_; }
  std::span<const T> grads() const { return grads_; }

  const std::vector<ParamView>& views() const { return views_; }
  std::size_t find(std::string_view name) const;  // throws sparq::Error when absent
  std::size_t size() const { return params_.size(); }

 private:
  std::vector<ParamView> views_;
  std::vector<T> params_;
  std::vector<T> grads_;
};

}  // namespace sparq
