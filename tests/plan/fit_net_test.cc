// fit_alpha_beta against the closed form: times made from a known latency
// and bandwidth give them back; the edge cases refuse or clamp.
#include "sparq/plan/fit_net.h"

#include <gtest/gtest.h>

#include <vector>

#include "sparq/core/error.h"
#include "sparq/transport/net_model.h"

namespace sparq::plan {
namespace {

// Ring allreduces and pairwise alltoalls of 16 KiB-4 MiB on 4 ranks.
std::vector<CollectiveTime> collectives(double latency, double per_byte) {
  std::vector<CollectiveTime> out;
  for (double size = 16384; size <= 4194304; size *= 4) {
    out.push_back({6, 2 * 0.75 * size, 0});  // ring: 2(P-1) messages of size/P
    out.push_back({3, 0.75 * size, 0});      // pairwise: P-1 blocks of size/P
  }
  for (CollectiveTime& c : out) c.seconds = c.messages * latency + c.bytes * per_byte;
  return out;
}

TEST(FitNet, RecoversTheLatencyAndBandwidthTheTimesWereMadeOf) {
  const NetFit f = fit_alpha_beta(collectives(50e-6, 1 / 125e6));
  EXPECT_NEAR(f.latency_s, 50e-6, 1e-12);
  EXPECT_NEAR(f.seconds_per_byte * 125e6, 1, 1e-9);
  EXPECT_EQ(f.spec(), "125.0MBps,50us");
  const NetModel m = parse_net_model(f.spec());  // the spec is --net's own syntax
  EXPECT_NEAR(m.alpha_s, 50e-6, 1e-12);
  EXPECT_NEAR(m.beta_s_per_b * 125e6, 1, 1e-9);
}

TEST(FitNet, ANegativeLatencyIsZeroAndTheBandwidthRefittedAlone) {
  std::vector<CollectiveTime> c = collectives(0, 1 / 100e6);
  for (CollectiveTime& t : c) t.seconds -= t.messages * 20e-6;  // faster than bytes/BW: latency < 0
  const NetFit f = fit_alpha_beta(c);
  EXPECT_EQ(f.latency_s, 0);
  double bb = 0, bs = 0;
  for (const CollectiveTime& t : c) bb += t.bytes * t.bytes, bs += t.bytes * t.seconds;
  EXPECT_NEAR(f.seconds_per_byte, bs / bb, 1e-18);
}

TEST(FitNet, TimesThatDoNotGrowWithTheBytesOrTooFewAreRefused) {
  std::vector<CollectiveTime> flat = collectives(1e-3, 0);
  for (CollectiveTime& t : flat) t.seconds = 1e-3;
  flat[0].seconds = 2e-3;  // the smallest the slowest: the bytes' slope is negative
  EXPECT_THROW(fit_alpha_beta(flat), InputError);
  EXPECT_THROW(fit_alpha_beta(std::vector<CollectiveTime>{{2, 1000, 1e-3}}), InputError);
  EXPECT_THROW(fit_alpha_beta(std::vector<CollectiveTime>{{2, 1000, 1e-3}, {2, 2000, std::nan("")}}), InputError);
}

}  // namespace
}  // namespace sparq::plan
