#include "sparq/core/blob.h"

#include <cstring>

#include "sparq/core/error.h"

namespace sparq {

void BlobWriter::raw(const void* p, std::size_t n) {
  const auto* b = static_cast<const std::byte*>(p);
  out_.insert(out_.end(), b, b + n);
}
void BlobWriter::u64(std::uint64_t v) { raw(&v, sizeof v); }
void BlobWriter::f32(float v) { raw(&v, sizeof v); }
void BlobWriter::str(std::string_view s) {
  u64(s.size());
  raw(s.data(), s.size());
}
void BlobWriter::floats(std::span<const float> v) {
  u64(v.size());
  raw(v.data(), v.size_bytes());
}
void BlobWriter::bytes(std::span<const std::byte> b) {
  u64(b.size());
  raw(b.data(), b.size());
}

void BlobReader::raw(void* p, std::size_t n) {
  SPARQ_CHECK_AS(InputError, n <= in_.size() - pos_, "{}: truncated ({} bytes needed at offset {}, {} left)", what_, n,
                 pos_, in_.size() - pos_);
  if (n > 0) std::memcpy(p, in_.data() + pos_, n);
  pos_ += n;
}
std::uint64_t BlobReader::u64() {
  std::uint64_t v;
  raw(&v, sizeof v);
  return v;
}
float BlobReader::f32() {
  float v;
  raw(&v, sizeof v);
  return v;
}
std::string BlobReader::str() {
  const std::uint64_t n = u64();
  SPARQ_CHECK_AS(InputError, n <= in_.size() - pos_, "{}: a string of {} bytes where {} are left", what_, n,
                 in_.size() - pos_);
  std::string s(n, '\0');
  raw(s.data(), n);
  return s;
}
std::vector<float> BlobReader::floats() {
  const std::uint64_t n = u64();
  SPARQ_CHECK_AS(InputError, n <= (in_.size() - pos_) / sizeof(float), "{}: {} floats where {} bytes are left", what_,
                 n, in_.size() - pos_);
  std::vector<float> v(n);
  raw(v.data(), n * sizeof(float));
  return v;
}
std::vector<std::byte> BlobReader::bytes() {
  const std::uint64_t n = u64();
  SPARQ_CHECK_AS(InputError, n <= in_.size() - pos_, "{}: a blob of {} bytes where {} are left", what_, n,
                 in_.size() - pos_);
  std::vector<std::byte> b(n);
  raw(b.data(), n);
  return b;
}
void BlobReader::expect_end() const {
  SPARQ_CHECK_AS(InputError, pos_ == in_.size(), "{}: {} bytes after the end", what_, in_.size() - pos_);
}

}  // namespace sparq
