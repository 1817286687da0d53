#pragma once
// For tests of what the virtual clock charges: the calling thread charged by
// a KernelCosts, and a cost file of given lines for this machine.
#include <fstream>
#include <string>

#include "sparq/core/kernel_costs.h"
#include "sparq/core/parallel_clock.h"

namespace sparq::test {

struct WithCosts {
  explicit WithCosts(KernelCosts& c) { set_emulated_threads({1, nullptr, &c}); }
  ~WithCosts() { set_emulated_threads({}); }
};

// The cost file's first two lines for this machine ("# sparq kernel costs..."
// and "cpu <model name>"), as KernelCosts writes them; `probe` is a scratch path.
inline std::string cost_file_header(const std::string& probe) {
  KernelCosts().save(probe);
  std::ifstream in(probe);
  std::string head, cpu;
  std::getline(in, head);
  std::getline(in, cpu);
  return head + "\n" + cpu + "\n";
}

// CPU seconds the clock charges the calling thread for f().
template <class F>
double charged_for(F&& f) {
  const double c = charged_cpu_seconds();
  f();
  return charged_cpu_seconds() - c;
}

}  // namespace sparq::test
