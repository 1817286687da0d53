// On the virtual clock a wire codec is charged by its count of values: a cost
// file's per-value cost for the codec's format and the call's size class,
// times the values, whatever the call used (the file's costs are far above
// anything an encoding of 1000 values takes, so only the charge can reach
// them). A format the file does not name is charged as measured.
#include <gtest/gtest.h>

#include <cstddef>
#include <fstream>
#include <vector>

#include "sparq/coll/codec.h"
#include "tests/core/with_costs.h"

namespace sparq {
namespace {

TEST(CodecCharge, EncodeAndDecodeChargedByTheirCountOfValues) {
  const std::string path = ::testing::TempDir() + "codec_costs.txt";
  // Shapes: the codec's kind (1 row-wise, 2 QSGD), its bits, the row length
  // or QSGD's bucket, the scale's type or QSGD's threads; then the size class
  // of 1000 values (std::bit_width(1000) = 10).
  std::ofstream(path) << test::cost_file_header(path) << "codec_encode_per_value 1 4 512 0 10 0.001\n"
                      << "codec_encode_ec_per_value 1 4 512 0 10 0.002\n"
                      << "codec_decode_per_value 1 4 512 0 10 0.003\n"
                      << "codec_encode_per_value 2 4 512 1 10 0.004\n";
  KernelCosts costs;
  costs.load(path);
  const test::WithCosts with(costs);
  constexpr std::size_t kN = 1000;
  std::vector<float> x(kN), err(kN), back(kN);
  for (std::size_t i = 0; i < kN; ++i) x[i] = static_cast<float>(i % 17) - 8.0f;
  const auto charged_near = [](double got, double want) {
    EXPECT_GE(got, want - 1e-9);
    EXPECT_LT(got, want + 5e-3);  // the test's own CPU around the codec
  };
  const Codec q4 = parse_codec("q4");
  std::vector<std::byte> wire(q4.bytes(kN));
  charged_near(test::charged_for([&] { q4.encode(x, wire, 0, 0); }), kN * 0.001);
  charged_near(test::charged_for([&] { q4.encode_ec(x, err, wire); }), kN * 0.002);
  charged_near(test::charged_for([&] { q4.decode(wire, back); }), kN * 0.003);
  const Codec qsgd4 = parse_codec("qsgd4");
  std::vector<std::byte> qwire(qsgd4.bytes(kN));
  charged_near(test::charged_for([&] { qsgd4.encode(x, qwire, 3, 7); }), kN * 0.004);
  // Another format, another size class: not in the file, so as measured.
  const Codec q8 = parse_codec("q8");
  std::vector<std::byte> wire8(q8.bytes(kN));
  EXPECT_LT(test::charged_for([&] { q8.encode(x, wire8, 0, 0); }), 0.1);
  std::vector<std::byte> small(q4.bytes(kN / 2));
  EXPECT_LT(test::charged_for([&] { q4.encode(std::span(x).first(kN / 2), small, 0, 0); }), 0.1);
}

}  // namespace
}  // namespace sparq
