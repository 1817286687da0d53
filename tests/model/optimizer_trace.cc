// Test aid of tests/python/optimizer_parity_test.py: runs sparq's dense
// update (dense_update, what Optimizer::step applies to the dense buffer)
// with the learning-rate schedule over given gradients, and writes the
// parameters after every update, for comparison with PyTorch's optimizers.
//
//   optimizer_trace OPTIMIZER LR WARMUP DECAY_START DECAY_STEPS IN OUT
//   IN:  u64 n, u64 steps, float[n] initial parameters, float[steps][n] gradients
//   OUT: float[steps][n] the parameters after each update
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "sparq/core/error.h"
#include "sparq/model/optimizer.h"

namespace {

template <class T>
void read(std::ifstream& in, T* p, std::size_t n, const char* what) {
  in.read(reinterpret_cast<char*>(p), static_cast<std::streamsize>(n * sizeof(T)));
  SPARQ_CHECK_AS(sparq::InputError, in.good(), "truncated input: {}", what);
}

void run(char** argv) {
  using namespace sparq;
  const DenseOptim o = parse_dense_optim(argv[1]);
  const double lr = std::stod(argv[2]);
  const LrSchedule sched{std::stoull(argv[3]), std::stoull(argv[4]), std::stoull(argv[5])};
  sched.validate();
  std::ifstream in(argv[6], std::ios::binary);
  SPARQ_CHECK_AS(InputError, in.good(), "cannot open '{}'", argv[6]);
  std::uint64_t n = 0, steps = 0;
  read(in, &n, 1, "n");
  read(in, &steps, 1, "steps");
  std::vector<float> params(n), grads(n);
  read(in, params.data(), n, "parameters");
  std::vector<std::vector<float>> state(dense_state_vectors(o), std::vector<float>(n, 0.0f));
  std::ofstream out(argv[7], std::ios::binary);
  for (std::uint64_t t = 1; t <= steps; ++t) {
    read(in, grads.data(), n, "gradients");
    dense_update<float>(o, params, grads, state, sched.lr(lr, t), t);
    out.write(reinterpret_cast<const char*>(params.data()), static_cast<std::streamsize>(n * sizeof(float)));
  }
  SPARQ_CHECK_AS(InputError, out.good(), "write error on '{}'", argv[7]);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr, "usage: optimizer_trace OPTIMIZER LR WARMUP DECAY_START DECAY_STEPS IN OUT\n");
    return 2;
  }
  try {
    run(argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "optimizer_trace: %s\n", e.what());
    return 1;
  }
  return 0;
}
