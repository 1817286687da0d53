#include "sparq/core/kernel_costs.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include "sparq/core/error.h"
#include "sparq/core/parallel_clock.h"

namespace sparq {

namespace {

constexpr std::string_view kHeader = "# sparq kernel costs: CPU seconds of one call, by kernel and shape";

std::string this_cpu() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0)
      if (const auto colon = line.find(':'); colon != std::string::npos)
        return line.substr(line.find_first_not_of(' ', colon + 1));
  return "unknown";
}

std::uint64_t key_of(std::string_view kernel, const std::size_t (&shape)[5]) {
  std::uint64_t h = 14695981039346656037ull;  // FNV-1a
  const auto mix = [&h](std::uint64_t byte) { h = (h ^ byte) * 1099511628211ull; };
  for (char c : kernel) mix(static_cast<unsigned char>(c));
  for (std::size_t x : shape)
    for (int i = 0; i < 8; ++i) mix((x >> (8 * i)) & 0xff);
  return h;
}

std::string label_of(std::string_view kernel, const std::size_t (&shape)[5]) {
  return fmt::format("{} {} {} {} {} {}", kernel, shape[0], shape[1], shape[2], shape[3], shape[4]);
}

// Per thread: the charge so far minus the CPU time it replaced, the open
// kernel's depth, and the shapes this thread has called (its first call of
// each is not a sample).
thread_local double t_adjust = 0;
thread_local int t_depth = 0;
thread_local std::unordered_set<std::uint64_t> t_seen;

}  // namespace

double KernelCosts::charge(std::string_view kernel, const std::size_t (&shape)[5], double measured, bool sample,
                           std::size_t units) {
  std::lock_guard lk(mu_);
  Entry& e = entries_[key_of(kernel, shape)];
  if (e.cost >= 0) {
    if (sample && units > 0 && !e.kept) keep_later(e, measured / static_cast<double>(units));
    return e.cost * static_cast<double>(units);
  }
  if (!sample || units == 0) return measured;
  if (e.label.empty()) e.label = label_of(kernel, shape);  // once a shape: not on every call
  e.samples.push_back(measured / static_cast<double>(units));
  if (e.samples.size() == kSamples) {
    std::nth_element(e.samples.begin(), e.samples.begin() + kSamples / 2, e.samples.end());
    e.cost = e.samples[kSamples / 2];
    std::vector<double>().swap(e.samples);
  }
  return measured;
}

// Every stride-th call, the stride doubling (and every other value kept
// dropped) each time kPool are kept: an even sample of all the calls, in
// bounded memory.
void KernelCosts::keep_later(Entry& e, double per_unit) {
  if (e.calls++ % e.stride != 0) return;
  e.later.push_back(per_unit);
  if (e.later.size() < kPool) return;
  for (std::size_t i = 0; i < kPool / 2; ++i) e.later[i] = e.later[2 * i];
  e.later.resize(kPool / 2);
  e.stride *= 2;
}

std::size_t KernelCosts::refit() {
  std::lock_guard lk(mu_);
  std::size_t n = 0;
  for (auto& [key, e] : entries_) {
    if (e.later.size() >= kSamples) {
      const auto mid = e.later.begin() + static_cast<std::ptrdiff_t>(e.later.size() / 2);
      std::nth_element(e.later.begin(), mid, e.later.end());
      n += *mid != e.cost;
      e.cost = *mid;
    }
    std::vector<double>().swap(e.later);
    e.calls = 0, e.stride = 1;
  }
  return n;
}

void KernelCosts::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return;  // a new file: written by save()
  std::string line;
  std::size_t n = 0;
  const auto bad = [&](std::string_view why) {
    SPARQ_THROW(InputError, "{}:{}: {} (a file of sparq train --kernel-costs; delete it to measure anew)", path, n,
                why);
  };
  if (++n, !std::getline(in, line) || line != kHeader) bad("not a kernel-costs file");
  if (++n, !std::getline(in, line) || line.rfind("cpu ", 0) != 0) bad("expected 'cpu <model name>'");
  if (const std::string cpu = this_cpu(); line.substr(4) != cpu)
    bad(fmt::format("costs measured on '{}', this machine's CPU is '{}'", line.substr(4), cpu));
  std::lock_guard lk(mu_);
  while (++n, std::getline(in, line)) {
    std::istringstream s(line);
    std::string kernel;
    std::size_t shape[5];
    double cost = -1;
    std::string rest;
    if (!(s >> kernel >> shape[0] >> shape[1] >> shape[2] >> shape[3] >> shape[4] >> cost) || (s >> rest) ||
        !std::isfinite(cost) || cost < 0)
      bad("expected '<kernel> <5 sizes> <seconds >= 0>'");
    Entry& e = entries_[key_of(kernel, shape)] = Entry{};
    e.cost = cost, e.label = label_of(kernel, shape), e.kept = true;
  }
}

void KernelCosts::save(const std::string& path) const {
  std::ofstream out(path);
  out << kHeader << "\ncpu " << this_cpu() << '\n';
  std::lock_guard lk(mu_);
  for (const auto& [key, e] : entries_)
    if (e.cost >= 0) out << e.label << ' ' << fmt::format("{:.9g}", e.cost) << '\n';
  SPARQ_CHECK_AS(InputError, out.good(), "could not write the kernel costs to {}", path);
}

std::size_t KernelCosts::fixed() const {
  std::lock_guard lk(mu_);
  return static_cast<std::size_t>(
      std::count_if(entries_.begin(), entries_.end(), [](const auto& kv) { return kv.second.cost >= 0; }));
}

ChargedKernel::ChargedKernel(const char* kernel, std::size_t a, std::size_t b, std::size_t c, std::size_t d,
                             std::size_t e)
    : kernel_(kernel), shape_{a, b, c, d, e}, units_(1) {
  start();
}

ChargedKernel::ChargedKernel(const char* kernel, Units units, std::size_t a, std::size_t b, std::size_t c,
                             std::size_t d)
    : kernel_(kernel), shape_{a, b, c, d, static_cast<std::size_t>(std::bit_width(units.n))}, units_(units.n) {
  start();
}

void ChargedKernel::start() {
  if (t_depth++ > 0 || !emulated_threads().costs) return;
  costs_ = emulated_threads().costs;
  start_ = thread_cpu_seconds();
}

ChargedKernel::~ChargedKernel() {
  --t_depth;
  if (!costs_) return;
  const double measured = thread_cpu_seconds() - start_;
  const bool sample = !t_seen.insert(key_of(kernel_, shape_)).second;
  t_adjust += costs_->charge(kernel_, shape_, measured, sample, units_) - measured;
}

double charged_cpu_seconds() { return thread_cpu_seconds() + t_adjust; }

}  // namespace sparq
