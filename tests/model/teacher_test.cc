#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "sparq/model/metrics.h"
#include "sparq/model/teacher.h"

namespace sparq {
namespace {

TEST(Teacher, CalibratedToTargetsAndDeterministic) {
  TeacherOptions to;
  to.pilot = 20000;
  Teacher t(to, SyntheticOptions{});
  const auto& c = t.calibration();
  EXPECT_NEAR(c.positive_rate, 0.25, 1e-3);
  EXPECT_NEAR(c.expected_auc, 0.80, 2e-3);
  std::vector<CriteoRecord> recs;
  std::vector<float> p;
  t.generate(kTestIndexBase, 30000, recs, &p, 2);
  std::vector<float> y(recs.size());
  for (std::size_t i = 0; i < recs.size(); ++i) y[i] = recs[i].label;
  const double pos = std::accumulate(y.begin(), y.end(), 0.0) / static_cast<double>(y.size());
  EXPECT_NEAR(pos, 0.25, 0.015);
  EXPECT_NEAR(roc_auc(p, y), 0.80, 0.015);

  Teacher t2(to, SyntheticOptions{});
  std::vector<CriteoRecord> recs2;
  std::string tsv;
  t2.generate(
      kTestIndexBase, 1000,
      [&](const SyntheticSample& s, float label, float) {
        SyntheticFeatures::to_record(s, label, recs2.emplace_back());
        format_criteo_line(label, s.ints, s.present, s.values, tsv);
      },
      1);
  EXPECT_EQ(std::memcmp(recs.data(), recs2.data(), 1000 * sizeof(CriteoRecord)), 0);
  EXPECT_EQ(std::count(tsv.begin(), tsv.end(), '\n'), 1000);
}

}  // namespace
}  // namespace sparq
