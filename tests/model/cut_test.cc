// An MLP cut into two stages (as the model-parallel trainer places them on two
// ranks) computes exactly what the uncut MLP computes: same outputs, same
// parameter gradients, same input gradient, bit for bit.
#include <gtest/gtest.h>

#include <cstring>

#include "sparq/core/rng.h"
#include "sparq/model/mlp.h"

namespace sparq {
namespace {

template <class T>
bool same_bits(const T* a, const T* b, std::size_t n) {
  return std::memcmp(a, b, n * sizeof(T)) == 0;
}

class Cut : public ::testing::TestWithParam<std::size_t> {};

TEST_P(Cut, EqualsUncut) {
  const MlpSpec spec{{7, 9, 8, 5, 3}, false};
  const std::size_t cut = GetParam(), B = 6;
  DenseParams<float> full_store, s1_store, s2_store;
  Mlp<float> full(spec, full_store, "m");
  Mlp<float> s1(spec, s1_store, "m", 0, cut);
  Mlp<float> s2(spec, s2_store, "m", cut);
  full.init(3, 0);
  s1.init(3, 0);  // same seed: per-layer streams give the same parameters
  s2.init(3, 0);
  for (const auto* st : {&s1_store, &s2_store})
    for (const auto& v : st->views()) {
      const auto a = st->param(st->find(v.name));
      const auto b = full_store.param(full_store.find(v.name));
      ASSERT_TRUE(same_bits(a.data(), b.data(), a.size())) << v.name;
    }

  Rng rng(9);
  std::vector<float> x(B * 7), dy(B * 3);
  for (auto& v : x) v = static_cast<float>(rng.normal());
  for (auto& v : dy) v = static_cast<float>(rng.normal());

  const float* y_full = full.forward(x.data(), B);
  const float* act = s1.forward(x.data(), B);
  std::vector<float> wire(act, act + B * s1.out_dim());  // what would be sent
  const float* y_cut = s2.forward(wire.data(), B);
  ASSERT_TRUE(same_bits(y_full, y_cut, B * 3));

  const float* dx_full = full.backward(dy.data(), true);
  const float* g = s2.backward(dy.data(), true);
  std::vector<float> wire_back(g, g + B * s2.in_dim());
  const float* dx_cut = s1.backward(wire_back.data(), true);
  ASSERT_TRUE(same_bits(dx_full, dx_cut, B * 7));
  for (const auto* st : {&s1_store, &s2_store})
    for (const auto& v : st->views()) {
      const auto a = st->grad(st->find(v.name));
      const auto b = full_store.grad(full_store.find(v.name));
      EXPECT_TRUE(same_bits(a.data(), b.data(), a.size())) << v.name;
    }
}

INSTANTIATE_TEST_SUITE_P(AfterEachLayer, Cut, ::testing::Values(0, 1, 2, 3, 4));

}  // namespace
}  // namespace sparq
