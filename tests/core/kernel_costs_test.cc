// KernelCosts against a plain reference: the median of a shape's samples
// (sorted here), fixed after them, by call or by unit; costs read from a file replace a kernel's
// measured CPU time in charged_cpu_seconds(); bad files name file and line.
#include "sparq/core/kernel_costs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "sparq/core/error.h"
#include "sparq/core/parallel_clock.h"
#include "tests/core/with_costs.h"

namespace sparq {
namespace {

void burn_cpu(double seconds) {
  const double a = thread_cpu_seconds();
  volatile double sink = 0;
  while (thread_cpu_seconds() - a < seconds)
    for (int i = 0; i < 1000; ++i) sink = sink + std::sqrt(static_cast<double>(i));
}

std::string temp_path(const char* name) { return ::testing::TempDir() + name; }

// "cpu <model name>", as KernelCosts writes it.
std::string cpu_line() {
  const std::string head = test::cost_file_header(temp_path("kc_probe.txt"));
  return head.substr(head.find('\n') + 1, head.size() - head.find('\n') - 2);
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

using test::WithCosts;

TEST(KernelCosts, TheMedianOfItsSamplesFixedAfterThem) {
  constexpr std::size_t kOne[5] = {1, 0, 0, 0, 0}, kTwo[5] = {2, 0, 0, 0, 0};
  KernelCosts costs;
  std::vector<double> samples(KernelCosts::kSamples);
  for (std::size_t i = 0; i < samples.size(); ++i) samples[i] = 1e-3 * static_cast<double>(i * i % 97 + 1);
  std::shuffle(samples.begin(), samples.end(), std::mt19937(7));
  // Calls that are not samples (a thread's first of the shape) count for nothing.
  EXPECT_EQ(costs.charge("k", kOne, 5.0, false), 5.0);
  for (double s : samples) EXPECT_EQ(costs.charge("k", kOne, s, true), s);
  std::vector<double> sorted = samples;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  EXPECT_EQ(costs.charge("k", kOne, 99.0, true), median);
  EXPECT_EQ(costs.charge("k", kOne, 0.0, false), median);
  EXPECT_EQ(costs.charge("k", kTwo, 3.0, true), 3.0);  // another shape: its own samples
  EXPECT_EQ(costs.fixed(), 1u);
}

TEST(KernelCosts, ByUnitsTheMedianCostOfAUnitTimesTheCallsUnits) {
  // A kernel's shape by units: a row's width and the element type, then the
  // size class of calls of 256-511 units (std::bit_width 9).
  constexpr std::size_t kRow[5] = {16, 4, 0, 0, 9};
  KernelCosts costs;
  std::vector<double> per_unit(KernelCosts::kSamples);
  for (std::size_t i = 0; i < per_unit.size(); ++i) per_unit[i] = 1e-6 * static_cast<double>(i * 37 % 61 + 1);
  EXPECT_EQ(costs.charge("rows", kRow, 0.25, true, 0), 0.25);  // no units: as measured, not a sample
  for (std::size_t i = 0; i < per_unit.size(); ++i) {
    const double units = static_cast<double>(256 + 4 * i);
    EXPECT_EQ(costs.charge("rows", kRow, per_unit[i] * units, true, 256 + 4 * i), per_unit[i] * units);
  }
  std::vector<double> sorted = per_unit;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  EXPECT_DOUBLE_EQ(costs.charge("rows", kRow, 1.0, true, 300), 300 * median);
  // Through ChargedKernel: a call of 500 units is charged 500 of them,
  // whatever it used; one of 5000 (another size class, not sampled yet) what it used.
  WithCosts with(costs);
  const auto charged = [](std::size_t units, double burn) {
    const double c = charged_cpu_seconds();
    {
      const ChargedKernel k("rows", Units{units}, 16, 4);
      burn_cpu(burn);
    }
    return charged_cpu_seconds() - c;
  };
  const double fixed = charged(500, 0.01);
  EXPECT_GE(fixed, 500 * median - 1e-6);
  EXPECT_LT(fixed, 500 * median + 5e-4);  // the test's own CPU around the kernel
  EXPECT_GE(charged(5000, 0.01), 0.01 - 1e-6);
}

TEST(KernelCosts, RefitTakesTheMedianOfEveryCallSinceTheCostWasFixed) {
  constexpr std::size_t kGemm[5] = {1, 0, 0, 0, 0}, kRows[5] = {16, 4, 0, 0, 9}, kFew[5] = {3, 0, 0, 0, 0},
                        kFiled[5] = {7, 0, 0, 0, 0};
  const std::string path = temp_path("kc_refit.txt");
  write(path, "# sparq kernel costs: CPU seconds of one call, by kernel and shape\n" + cpu_line() +
                  "\nk 7 0 0 0 0 0.5\n");
  KernelCosts costs;
  costs.load(path);
  for (std::size_t i = 0; i < KernelCosts::kSamples; ++i) {
    costs.charge("k", kGemm, 1.0, true);
    costs.charge("rows", kRows, 300 * 1.0, true, 300);
    costs.charge("k", kFew, 1.0, true);
  }
  // 10000 later calls cost 1, 2, ..., 10000 (their median 5000.5), the
  // rows' the same per unit; each is still charged the fixed cost, and
  // calls that are not samples count for nothing.
  constexpr int kLater = 10000;
  for (int i = 1; i <= kLater; ++i) {
    EXPECT_EQ(costs.charge("k", kGemm, i, true), 1.0);
    EXPECT_EQ(costs.charge("rows", kRows, 400.0 * i, true, 400), 400.0);
    EXPECT_EQ(costs.charge("k", kGemm, 1e9, false), 1.0);
    EXPECT_EQ(costs.charge("k", kFiled, i, true), 0.5);
  }
  for (std::size_t i = 0; i + 1 < KernelCosts::kSamples; ++i) costs.charge("k", kFew, 9.0, true);
  EXPECT_EQ(costs.refit(), 2u);
  // Kept evenly over all the calls, not the first ones: within a stride
  // (at most 10000 / 512 calls) of the median of all.
  EXPECT_NEAR(costs.charge("k", kGemm, 0.0, true), 5000.5, 40);
  EXPECT_NEAR(costs.charge("rows", kRows, 0.0, true, 2), 2 * 5000.5, 80);
  EXPECT_EQ(costs.charge("k", kFew, 0.0, true), 1.0);    // fewer later calls than kSamples: as it was
  EXPECT_EQ(costs.charge("k", kFiled, 0.0, true), 0.5);  // read from a file: fixed for good
  // A second refit takes the calls since the first alone.
  for (int i = 0; i < 100; ++i) costs.charge("k", kGemm, 7.0, true);
  EXPECT_EQ(costs.refit(), 1u);
  EXPECT_EQ(costs.charge("k", kGemm, 0.0, true), 7.0);
}

TEST(KernelCosts, AFixedCostReplacesTheKernelsCpuTime) {
  const std::string path = temp_path("kc_fixed.txt");
  write(path, "# sparq kernel costs: CPU seconds of one call, by kernel and shape\n" + cpu_line() +
                  "\nonednn_sgemm 1 2 3 0 0 0.5\n");
  KernelCosts costs;
  costs.load(path);
  EXPECT_EQ(costs.fixed(), 1u);
  const double c0 = charged_cpu_seconds();
  {
    WithCosts with(costs);
    const ChargedKernel k("onednn_sgemm", 1, 2, 3);
    const ChargedKernel nested("onednn_sgemm", 1, 2, 3);  // charged by the outer call alone
    burn_cpu(0.01);
  }
  const double charged = charged_cpu_seconds() - c0;
  EXPECT_GE(charged, 0.5 - 1e-6);
  EXPECT_LT(charged, 0.505);  // the test's own CPU around the kernel
  // Without costs a kernel is charged what it used.
  const double c1 = charged_cpu_seconds(), r1 = thread_cpu_seconds();
  {
    const ChargedKernel k("onednn_sgemm", 1, 2, 3);
    burn_cpu(0.01);
  }
  EXPECT_NEAR(charged_cpu_seconds() - c1, thread_cpu_seconds() - r1, 1e-3);  // not adjusted by 10 ms
}

TEST(KernelCosts, SavedCostsChargeTheSameInAnotherProcess) {
  const std::string path = temp_path("kc_roundtrip.txt");
  std::remove(path.c_str());
  KernelCosts first;
  first.load(path);  // no file yet: nothing fixed
  EXPECT_EQ(first.fixed(), 0u);
  double fixed_charge = 0;
  {
    WithCosts with(first);
    for (std::size_t i = 0; i <= KernelCosts::kSamples + 1; ++i) {
      const double c = charged_cpu_seconds();
      {
        const ChargedKernel k("colsum", 7, 9, 4);
        burn_cpu(1e-4);
      }
      fixed_charge = charged_cpu_seconds() - c;
    }
  }
  ASSERT_EQ(first.fixed(), 1u);  // the thread's first call and 64 samples, then fixed
  first.save(path);
  KernelCosts second;
  second.load(path);
  WithCosts with(second);
  const double c = charged_cpu_seconds();
  {
    const ChargedKernel k("colsum", 7, 9, 4);
    burn_cpu(0.02);  // 200x slower this time: still charged the saved cost
  }
  // Both charges hold the test's own CPU outside the kernel too (microseconds, more on a loaded or
  // sanitized machine), so the bound tells the saved 0.1 ms from the 20 ms burned, no finer.
  EXPECT_NEAR(charged_cpu_seconds() - c, fixed_charge, 1e-3);
}

TEST(KernelCosts, BadFilesNameFileAndLine) {
  const std::string path = temp_path("kc_bad.txt");
  const std::string header = "# sparq kernel costs: CPU seconds of one call, by kernel and shape\n";
  const auto fails_with = [&](const std::string& text, const std::string& want) {
    write(path, text);
    try {
      KernelCosts().load(path);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  fails_with("hello\n", path + ":1: not a kernel-costs file");
  fails_with(header + "cpu A CPU of another make\n", path + ":2: costs measured on 'A CPU of another make'");
  fails_with(header + cpu_line() + "\ncolsum 1 2 3\n", path + ":3: expected");
  fails_with(header + cpu_line() + "\ncolsum 1 2 3 0 0 -1\n", path + ":3: expected");
  fails_with(header + cpu_line() + "\ncolsum 1 2 3 0 0 1e-5\ncolsum 1 2 3 0 0 nan\n", path + ":4: expected");
}

}  // namespace
}  // namespace sparq
