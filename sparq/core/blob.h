#pragma once
// Little binary blobs for state that is saved and restored (a codec's
// residuals and thresholds): u64s, strings and float arrays, native byte
// order. The reader checks every length against what is left and throws
// InputError naming the blob, so a truncated or corrupt blob is an error,
// never an out-of-bounds read or a huge allocation.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sparq {

class BlobWriter {
 public:
  void u64(std::uint64_t v);
  void f32(float v);
  void str(std::string_view s);
  void floats(std::span<const float> v);
  void bytes(std::span<const std::byte> b);  // length-prefixed: a nested blob
  std::vector<std::byte> take() { return std::move(out_); }

 private:
  void raw(const void* p, std::size_t n);
  std::vector<std::byte> out_;
};

class BlobReader {
 public:
  // `what` names the blob in errors.
  BlobReader(std::span<const std::byte> in, std::string what) : in_(in), what_(std::move(what)) {}
  std::uint64_t u64();
  float f32();
  std::string str();
  std::vector<float> floats();
  std::vector<std::byte> bytes();
  // Throws unless every byte was read.
  void expect_end() const;
  const std::string& what() const { return what_; }

 private:
  void raw(void* p, std::size_t n);
  std::span<const std::byte> in_;
  std::size_t pos_ = 0;
  std::string what_;
};

}  // namespace sparq
