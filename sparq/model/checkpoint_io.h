#pragma once
// The bytes of checkpoint files, shared by whole checkpoints (checkpoint.cc)
// and deltas (checkpoint_delta.cc): a writer that keeps the CRC-32 of what
// it wrote, to a file or to memory; a reader that checks the CRC before
// anything is parsed and bounds every length by what is left of the file;
// and the atomic, durable write (path.tmp, fsync, rename, fsync of the
// directory). Internal to sparq_model.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace sparq::ckpt {

inline constexpr std::size_t kCrcBytes = 4;
// '4', not '3': one flipped bit must not turn a checksummed file into an
// older, unchecked layout ('3' is one bit away from '2' and '1', '4' two).
inline constexpr char kMagic[8] = {'S', 'P', 'A', 'R', 'Q', 'C', 'K', '4'};
inline constexpr char kMagicV2[8] = {'S', 'P', 'A', 'R', 'Q', 'C', 'K', '2'};  // no CRC
inline constexpr char kMagicV1[8] = {'S', 'P', 'A', 'R', 'Q', 'C', 'K', '1'};  // no CRC, no codec section
inline constexpr char kMagicDelta[8] = {'S', 'P', 'A', 'R', 'Q', 'D', 'L', '1'};

enum class Layout { V1, V2, V4, Delta };

struct Closer {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, Closer>;

// Writes a file with the running CRC of its bytes, through a buffer of
// whole 4 KiB blocks: to a file opened with O_DIRECT where the file system
// takes it, so a checkpoint skips the page cache (the kernel's copy into it
// was most of the background writer's CPU, and it pushes out pages training
// reads); elsewhere (tmpfs) through the page cache.
struct Out {
  const std::string& path;
  std::uint32_t crc = 0;
  std::uint64_t size = 0;
  Out(int fd, const std::string& p);
  void bytes(const void* p, std::size_t n);
  void u64(std::uint64_t v) { bytes(&v, 8); }
  void floats(std::span<const float> v) {
    u64(v.size());
    bytes(v.data(), v.size() * sizeof(float));
  }
  void str(const std::string& s) {
    u64(s.size());
    bytes(s.data(), s.size());
  }
  // The CRC of everything before it: the last bytes of every file. `crc`
  // stays that value (the one a reader finds stored).
  void trailer() {
    const std::uint32_t c = crc;
    bytes(&c, kCrcBytes);
    crc = c;
  }
  // Writes what the buffer holds and gives the file its size.
  void finish();

 private:
  void write_buffer(std::size_t n);
  int fd_;
  std::span<std::byte> buf_;  // this thread's, reused from file to file
  std::size_t fill_ = 0;
  std::uint64_t written_ = 0;
};

struct In {
  std::FILE* f = nullptr;
  const std::string& path;
  std::uint64_t end = 0;  // where the data ends (before the CRC)
  Layout layout = Layout::V4;
  std::uint32_t crc = 0;  // the stored CRC (checked), for V4 and Delta
  explicit In(const std::string& p) : path(p) {}
  void bytes(void* p, std::size_t n);
  std::uint64_t u64() {
    std::uint64_t v;
    bytes(&v, 8);
    return v;
  }
  std::uint64_t left() const;
  // A byte count read from the file, no more than what is left of it, so a
  // corrupt value is an error, not a huge allocation.
  std::uint64_t length(const char* what);
  std::string str(const char* what) {
    std::string s(length(what), '\0');
    bytes(s.data(), s.size());
    return s;
  }
  // n values read into v, which must have n of them.
  void floats(std::span<float> v, const char* what);
  // Past `expected` values this model has no storage for.
  void skip_floats(std::uint64_t expected, const char* what);
  void skip(std::uint64_t bytes, const char* what);
};

// Opens `path` for `in`: tells the layout from the magic and, for the
// checksummed ones, checks the CRC of the whole file first (one sequential
// read). Leaves the file just past the magic.
File open_read(In& in);

// What follows the magic: for a delta, the point it follows (a path
// relative to the delta's folder, and that file's CRC); then the metadata.
struct Header {
  std::string prev;
  std::uint32_t prev_crc = 0;
  std::string meta;
};
Header read_header(In& in);
void put_header(Out& o, const char (&magic)[8], const Header& h);

// The codec-state section: a count, then each rank's bytes (into `states`
// unless null).
void read_rank_states(In& in, std::vector<std::vector<std::byte>>* states);
void put_rank_states(Out& o, std::span<const std::vector<std::byte>> states);

// Writes what `fill` puts out to `path` through "<path>.tmp": fsynced,
// renamed over `path`, the directory fsynced. A crash, a kill or a full disk
// at any moment leaves either the previous file or the new one, whole.
// Returns the CRC and the size of what was written.
struct Written {
  std::uint32_t crc = 0;
  std::uint64_t bytes = 0;
};
Written write_atomic(const std::string& path, const std::function<void(Out&)>& fill);

}  // namespace sparq::ckpt
