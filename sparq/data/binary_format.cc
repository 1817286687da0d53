#include "sparq/data/binary_format.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "sparq/core/error.h"

namespace sparq {

namespace {
constexpr char kMagic[8] = {'S', 'P', 'A', 'R', 'Q', 'C', 'R', '1'};
constexpr std::size_t kHeader = 64;

struct Header {
  char magic[8];
  std::uint32_t version, record_bytes, num_dense, num_sparse;
  std::uint64_t count, bad_lines;
  char pad[kHeader - 40];
};
static_assert(sizeof(Header) == kHeader);

Header make_header(std::uint64_t count, std::uint64_t bad) {
  Header h{};
  std::memcpy(h.magic, kMagic, 8);
  h.version = 1;
  h.record_bytes = sizeof(CriteoRecord);
  h.num_dense = kCriteoDense;
  h.num_sparse = kCriteoSparse;
  h.count = count;
  h.bad_lines = bad;
  return h;
}
}  // namespace

BinaryWriter::BinaryWriter(const std::string& path) : path_(path) {
  f_ = std::fopen(path.c_str(), "wb");
  SPARQ_CHECK_AS(InputError, f_ != nullptr, "cannot create '{}': {}", path, std::strerror(errno));
  const Header h = make_header(0, 0);  // count patched by close()
  SPARQ_CHECK_AS(InputError, std::fwrite(&h, sizeof h, 1, f_) == 1, "write error on '{}'", path_);
}

BinaryWriter::~BinaryWriter() {
  if (f_) try {
      close();
    } catch (...) {
    }
}

void BinaryWriter::write(std::span<const CriteoRecord> recs) {
  SPARQ_CHECK(f_ != nullptr, "write after close");
  if (recs.empty()) return;
  SPARQ_CHECK_AS(InputError, std::fwrite(recs.data(), sizeof(CriteoRecord), recs.size(), f_) == recs.size(),
                 "write error on '{}': {}", path_, std::strerror(errno));
  count_ += recs.size();
}

void BinaryWriter::close(std::uint64_t bad_lines) {
  if (!f_) return;
  const Header h = make_header(count_, bad_lines);
  const bool ok = std::fseek(f_, 0, SEEK_SET) == 0 && std::fwrite(&h, sizeof h, 1, f_) == 1;
  const bool closed = std::fclose(f_) == 0;
  f_ = nullptr;
  SPARQ_CHECK_AS(InputError, ok && closed, "write error on '{}'", path_);
}

MappedRecords::MappedRecords(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  SPARQ_CHECK_AS(InputError, fd >= 0, "cannot open '{}': {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < kHeader) {
    ::close(fd);
    SPARQ_THROW(InputError, "'{}' is not a sparq binary file (too short)", path);
  }
  bytes_ = static_cast<std::size_t>(st.st_size);
  // MAP_POPULATE maps every page now (one sequential pass over the page
  // cache) instead of one minor fault per record on the first shuffled epoch.
  base_ = ::mmap(nullptr, bytes_, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
  ::close(fd);
  SPARQ_CHECK_AS(InputError, base_ != MAP_FAILED, "cannot map '{}': {}", path, std::strerror(errno));
  Header h;
  std::memcpy(&h, base_, sizeof h);
  auto fail = [&](const std::string& why) {
    ::munmap(base_, bytes_);
    base_ = nullptr;
    SPARQ_THROW(InputError, "'{}': {}", path, why);
  };
  if (std::memcmp(h.magic, kMagic, 8) != 0) fail("not a sparq binary file (bad magic)");
  if (h.version != 1 || h.record_bytes != sizeof(CriteoRecord) || h.num_dense != kCriteoDense ||
      h.num_sparse != kCriteoSparse)
    fail(fmt::format("unsupported layout (version {}, {} B records, {} dense, {} sparse)", h.version, h.record_bytes,
                     h.num_dense, h.num_sparse));
  // count is compared by division first: count * 160 can wrap around 2^64.
  if (h.count > (bytes_ - kHeader) / sizeof(CriteoRecord) || kHeader + h.count * sizeof(CriteoRecord) != bytes_)
    fail(fmt::format("size {} B does not match {} records (truncated or still being written?)", bytes_, h.count));
  count_ = h.count;
  bad_lines_ = h.bad_lines;
  recs_ = reinterpret_cast<const CriteoRecord*>(static_cast<const char*>(base_) + kHeader);
}

MappedRecords::MappedRecords(MappedRecords&& o) noexcept
    : base_(o.base_), bytes_(o.bytes_), recs_(o.recs_), count_(o.count_), bad_lines_(o.bad_lines_) {
  o.base_ = nullptr;
  o.recs_ = nullptr;
  o.count_ = 0;
}

MappedRecords::~MappedRecords() {
  if (base_) ::munmap(base_, bytes_);
}

bool is_binary_records(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char m[8] = {};
  const bool ok = std::fread(m, 1, 8, f) == 8 && std::memcmp(m, kMagic, 8) == 0;
  std::fclose(f);
  return ok;
}

}  // namespace sparq
