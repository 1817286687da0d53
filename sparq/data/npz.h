#pragma once
// NumPy .npz files: a zip archive of .npy arrays (np.savez stores them,
// np.savez_compressed deflates them).
//
// Reading: the zip's central directory (zip64 records included, which
// numpy's writer uses), entries stored or deflated (zlib raw inflate, CRC-32
// checked), .npy format versions 1-3, little-endian bool / int8-64 /
// uint8-64 / float32 / float64, C order. Everything taken from the file is
// validated (offsets and sizes inside the file, the header's dict, shape x
// itemsize == payload): bad input is an InputError naming the file and the
// array, never a read out of bounds.
//
// Writing: stored (uncompressed) entries with their CRC-32, .npy version 1
// headers, into "<path>.tmp" renamed on finish(), so a failure never leaves
// half a file under the final name. No zip64: an archive over 4 GiB is an
// InputError.
//
// Memory: read_npz() holds every array of the archive in memory (plus, for
// a deflated entry, nothing more than its inflated bytes).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace sparq {

enum class NpyType { Bool, I8, I16, I32, I64, U8, U16, U32, U64, F32, F64 };

std::size_t npy_itemsize(NpyType t);
const char* npy_descr(NpyType t);  // "<f4", "|b1", ...
bool npy_is_integer(NpyType t);    // bool counts as integer (0/1)

// One array: its type, shape and little-endian C-order elements.
class NpyArray {
 public:
  NpyArray(NpyType type, std::vector<std::uint64_t> shape, std::vector<char> raw, std::size_t offset);
  NpyType type() const { return type_; }
  const std::vector<std::uint64_t>& shape() const { return shape_; }
  std::uint64_t count() const { return count_; }  // product of the shape (1 for a scalar)
  const char* data() const { return raw_.data() + offset_; }

  // Element i as an integer (integer or bool types) or as a double (any type).
  // Callers check npy_is_integer() first; uint64 above INT64_MAX wraps.
  std::int64_t int_at(std::uint64_t i) const;
  double real_at(std::uint64_t i) const;

 private:
  NpyType type_;
  std::vector<std::uint64_t> shape_;
  std::uint64_t count_;
  std::vector<char> raw_;  // the whole .npy entry: header, then the elements from offset_
  std::size_t offset_;
};

// "(3, 4)" for messages.
std::string npy_shape_text(const std::vector<std::uint64_t>& shape);

// Every array of the archive, by name without ".npy". Throws InputError.
std::map<std::string, NpyArray> read_npz(const std::string& path);

// True when the file starts with a zip local header ("PK\3\4").
bool is_zip(const std::string& path);

class NpzWriter {
 public:
  explicit NpzWriter(const std::string& path);  // creates "<path>.tmp"; throws InputError
  ~NpzWriter();                                 // without finish(): removes the temporary file
  NpzWriter(const NpzWriter&) = delete;
  NpzWriter& operator=(const NpzWriter&) = delete;

  // Appends "<name>.npy"; data holds product(shape) elements in C order.
  void add(const std::string& name, NpyType type, const std::vector<std::uint64_t>& shape, const void* data);
  void add(const std::string& name, const std::vector<std::uint64_t>& shape, std::span<const float> v);
  void add(const std::string& name, const std::vector<std::uint64_t>& shape, std::span<const std::int32_t> v);
  void add(const std::string& name, const std::vector<std::uint64_t>& shape, std::span<const std::int64_t> v);
  // Writes the central directory, closes and renames to the final path.
  void finish();

 private:
  struct Entry {
    std::string name;
    std::uint32_t crc, size, offset;
  };
  void bytes(const void* p, std::size_t n);
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  std::uint64_t pos_ = 0;
  std::vector<Entry> entries_;
};

}  // namespace sparq
