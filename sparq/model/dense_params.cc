#include "sparq/model/dense_params.h"

#include "sparq/core/error.h"

namespace sparq {

template <class T>
std::size_t DenseParams<T>::add(std::string name, std::size_t size) {
  for (const auto& v : views_) SPARQ_CHECK(v.name != name, "duplicate parameter name '{}'", name);
  views_.push_back({std::move(name), params_.size(), size});
  params_.resize(params_.size() + size, T(0));
  grads_.resize(grads_.size() + size, T(0));
  return views_.size() - 1;
}

template <class T>
std::size_t DenseParams<T>::find(std::string_view name) const {
  for (std::size_t i = 0; i < views_.size(); ++i)
    if (views_[i].name == name) return i;
  SPARQ_THROW(Error, "no dense parameter named '{}'", name);
}

template class DenseParams<float>;
template class DenseParams<double>;

}  // namespace sparq
