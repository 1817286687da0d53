// The stream wire format: round trips, one rejection per kind of corruption,
// and a fuzz-style sweep (random and mutated messages never crash: they decode
// to a valid stream or throw WireError).
#include "sparq/compress/stream_codec.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "sparq/core/error.h"

namespace sparq::compress {
namespace {

std::vector<std::byte> encode(const SparseStream& s) {
  std::vector<std::byte> w(encoded_size(s));
  encode_stream(s, w);
  return w;
}

void put_u32(std::vector<std::byte>& w, std::size_t off, std::uint32_t v) { std::memcpy(w.data() + off, &v, 4); }

// Header and body written by hand from the documented layout.
std::vector<std::byte> handmade(std::uint8_t kind, std::uint8_t c, std::uint32_t dim,
                                const std::vector<std::uint32_t>& idx, const std::vector<float>& val) {
  std::vector<std::byte> w(12);
  w[0] = std::byte{kind};
  w[1] = std::byte{c};
  put_u32(w, 4, dim);
  put_u32(w, 8, static_cast<std::uint32_t>(kind == 2 ? val.size() : idx.size()));
  for (auto i : idx)
    for (std::size_t b = 0; b < c; ++b) w.push_back(std::byte{static_cast<std::uint8_t>(i >> (8 * b))});
  for (float v : val) {
    std::byte bytes[4];
    std::memcpy(bytes, &v, 4);
    w.insert(w.end(), bytes, bytes + 4);
  }
  return w;
}

TEST(StreamCodec, EncodesTheDocumentedLayout) {
  const SparseStream s = SparseStream::sparse(300, {2, 299}, {1.5f, -2.0f});
  EXPECT_EQ(encode(s), handmade(1, 2, 300, {2, 299}, {1.5f, -2.0f}));
  EXPECT_EQ(encode(SparseStream::dense({1.0f, 2.0f})), handmade(2, 0, 2, {}, {1.0f, 2.0f}));
}

TEST(StreamCodec, RoundTripsEveryIndexWidth) {
  for (std::size_t dim : {1u, 256u, 257u, 65536u, 65537u, 1000000u}) {
    std::vector<std::uint32_t> idx;
    std::vector<float> val;
    for (std::size_t i = 0; i < dim; i += 1 + dim / 7) idx.push_back(static_cast<std::uint32_t>(i)), val.push_back(float(i) + 0.5f);
    idx.back() = static_cast<std::uint32_t>(dim - 1);
    const SparseStream s = SparseStream::sparse(dim, idx, val);
    const SparseStream d = decode_stream(encode(s));
    EXPECT_FALSE(d.is_dense());
    EXPECT_EQ(d.dim(), dim);
    EXPECT_EQ(std::vector(d.indices().begin(), d.indices().end()), idx);
    EXPECT_EQ(std::vector(d.values().begin(), d.values().end()), val);
    EXPECT_EQ(encode(d), encode(s));
  }
  const SparseStream dense = SparseStream::dense({3.0f, 0.0f, -1.0f});
  EXPECT_EQ(encode(decode_stream(encode(dense))), encode(dense));
  EXPECT_EQ(decode_stream(encode(SparseStream(0))).dim(), 0u);
}

TEST(StreamCodec, RejectsEachKindOfCorruption) {
  const auto good = handmade(1, 2, 300, {2, 7, 299}, {1, 2, 3});
  ASSERT_NO_THROW(decode_stream(good));
  auto expect_wire_error = [](std::vector<std::byte> w) { EXPECT_THROW(decode_stream(w), WireError); };
  expect_wire_error({});                                                  // empty
  expect_wire_error(std::vector<std::byte>(good.begin(), good.begin() + 11));  // short header
  expect_wire_error(std::vector<std::byte>(good.begin(), good.end() - 1));     // truncated body
  auto longer = good;
  longer.push_back(std::byte{0});
  expect_wire_error(longer);                                          // trailing bytes
  expect_wire_error(handmade(3, 2, 300, {2, 7, 299}, {1, 2, 3}));     // unknown kind
  expect_wire_error(handmade(1, 4, 300, {2, 7, 299}, {1, 2, 3}));     // index width not the dim's
  expect_wire_error(handmade(1, 2, 300, {2, 7, 300}, {1, 2, 3}));     // index out of range
  expect_wire_error(handmade(1, 2, 300, {7, 2, 299}, {1, 2, 3}));     // unsorted
  expect_wire_error(handmade(1, 2, 300, {2, 2, 299}, {1, 2, 3}));     // duplicate
  expect_wire_error(handmade(1, 1, 2, {0, 1, 1}, {1, 2, 3}));         // more pairs than dim
  expect_wire_error(handmade(2, 1, 3, {}, {1, 2, 3}));                // dense with c != 0
  auto reserved = good;
  reserved[2] = std::byte{1};
  expect_wire_error(reserved);
  auto dense_count = handmade(2, 0, 3, {}, {1, 2, 3});
  put_u32(dense_count, 8, 2);  // dense n != dim
  expect_wire_error(dense_count);
  auto huge = good;
  put_u32(huge, 8, 0xffffffffu);  // n claims 4G pairs: size check, no allocation
  expect_wire_error(huge);
}

// Decoding either succeeds with a stream that re-encodes to the same bytes,
// or throws WireError; anything else (crash, other exception) fails.
void decode_or_reject(const std::vector<std::byte>& w) {
  try {
    const SparseStream s = decode_stream(w);
    ASSERT_EQ(encode(s), w);
  } catch (const WireError&) {
  }
}

TEST(StreamCodec, FuzzRandomAndMutatedMessagesNeverCrash) {
  std::mt19937 rng(1234);
  const std::vector<std::vector<std::byte>> seeds = {
      handmade(1, 2, 300, {2, 7, 299}, {1, 2, 3}), handmade(1, 1, 200, {0, 199}, {1, 2}),
      handmade(1, 4, 70000, {5, 69999}, {1, 2}), handmade(2, 0, 4, {}, {1, 2, 3, 4}), handmade(1, 1, 5, {}, {})};
  for (int iter = 0; iter < 100000; ++iter) {
    std::vector<std::byte> w;
    if (iter % 4 == 0) {
      w.resize(rng() % 64);
      for (auto& b : w) b = std::byte{static_cast<std::uint8_t>(rng())};
      if (w.size() >= 4 && rng() % 2) w[0] = std::byte{static_cast<std::uint8_t>(1 + rng() % 2)}, w[2] = w[3] = std::byte{0};
    } else {
      w = seeds[rng() % seeds.size()];
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips && !w.empty(); ++f) w[rng() % w.size()] ^= std::byte{static_cast<std::uint8_t>(1u << (rng() % 8))};
      if (rng() % 8 == 0) w.resize(rng() % (w.size() + 9));
    }
    decode_or_reject(w);
  }
}

}  // namespace
}  // namespace sparq::compress
