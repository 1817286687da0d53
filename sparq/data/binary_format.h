#pragma once
// sparq's pre-processed binary format (written by `sparq convert`, read back
// by memory-mapping, no parsing):
//
//   offset 0   header, 64 bytes, little-endian
//              char[8] magic "SPARQCR1", u32 version (1), u32 record_bytes (160),
//              u32 num_dense (13), u32 num_sparse (26), u64 count, u64 bad_lines
//              (skipped when converting), zero padding
//   offset 64  count x CriteoRecord (criteo.h): float label, float dense[13]
//              (already log(1 + max(x, 0))), u32 sparse[26] (raw 32-bit values)
//
// Records are fixed-size, so rank r of P can take any block of them without
// an index, and the OS pages them in on demand (a reload costs no parse).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

#include "sparq/data/criteo.h"

namespace sparq {

class BinaryWriter {
 public:
  explicit BinaryWriter(const std::string& path);  // truncates; throws InputError
  ~BinaryWriter();
  BinaryWriter(const BinaryWriter&) = delete;
  BinaryWriter& operator=(const BinaryWriter&) = delete;
  void write(std::span<const CriteoRecord> recs);
  // Writes the final header (count) and closes; the destructor does it too
  // but cannot report errors.
  void close(std::uint64_t bad_lines = 0);
  std::uint64_t count() const { return count_; }

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
  std::uint64_t count_ = 0;
};

// A read-only memory map of a binary file. Validates the header and the
// file size (a truncated or foreign file is an InputError naming it).
class MappedRecords {
 public:
  explicit MappedRecords(const std::string& path);
  ~MappedRecords();
  MappedRecords(MappedRecords&& o) noexcept;
  MappedRecords& operator=(MappedRecords&&) = delete;
  MappedRecords(const MappedRecords&) = delete;
  std::span<const CriteoRecord> records() const { return {recs_, count_}; }
  std::uint64_t bad_lines() const { return bad_lines_; }

 private:
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
  const CriteoRecord* recs_ = nullptr;
  std::size_t count_ = 0;
  std::uint64_t bad_lines_ = 0;
};

// True when the file starts with the binary magic (so a data path can be
// either format).
bool is_binary_records(const std::string& path);

}  // namespace sparq
