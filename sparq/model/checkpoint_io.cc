#include "sparq/model/checkpoint_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "sparq/core/crc32.h"
#include "sparq/core/error.h"

namespace sparq::ckpt {

namespace {
constexpr std::size_t kBlock = 4096, kBufferBytes = std::size_t{4} << 20;

std::span<std::byte> thread_buffer() {
  struct Freer {
    void operator()(std::byte* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<std::byte, Freer> buf(static_cast<std::byte*>(std::aligned_alloc(kBlock, kBufferBytes)));
  SPARQ_CHECK(buf != nullptr, "out of memory for a checkpoint's write buffer");
  return {buf.get(), kBufferBytes};
}
}  // namespace

Out::Out(int fd, const std::string& p) : path(p), fd_(fd), buf_(thread_buffer()) {}

void Out::bytes(const void* p, std::size_t n) {
  // The CRC first: the copy below then finds the bytes in the CPU's cache.
  if (n > 0) crc = crc32(crc, p, n);
  size += n;
  for (auto src = static_cast<const std::byte*>(p); n > 0;) {
    const std::size_t k = std::min(n, buf_.size() - fill_);
    std::memcpy(buf_.data() + fill_, src, k);
    fill_ += k;
    src += k;
    n -= k;
    if (fill_ == buf_.size()) write_buffer(fill_);
  }
}

// Writes the buffer's first n bytes (whole blocks) at the file's end.
void Out::write_buffer(std::size_t n) {
  for (std::size_t done = 0; done < n;) {
    const ssize_t w = ::pwrite(fd_, buf_.data() + done, n - done, static_cast<off_t>(written_ + done));
    if (w < 0 && errno == EINVAL && (::fcntl(fd_, F_GETFL) & O_DIRECT)) {
      // The file system took O_DIRECT at open but not this write.
      SPARQ_CHECK_AS(InputError, ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_DIRECT) == 0,
                     "write error on '{}': {}", path, std::strerror(errno));
      continue;
    }
    SPARQ_CHECK_AS(InputError, w > 0 || (w < 0 && errno == EINTR), "write error on '{}': {}", path,
                   std::strerror(w < 0 ? errno : ENOSPC));
    if (w > 0) done += static_cast<std::size_t>(w);
  }
  written_ += n;
  fill_ = 0;
}

void Out::finish() {
  // Direct writes take whole blocks: the last one is padded, then cut off.
  const std::size_t padded = (fill_ + kBlock - 1) / kBlock * kBlock;
  std::memset(buf_.data() + fill_, 0, padded - fill_);
  write_buffer(padded);
  SPARQ_CHECK_AS(InputError, ::ftruncate(fd_, static_cast<off_t>(size)) == 0, "write error on '{}': {}", path,
                 std::strerror(errno));
}

void In::bytes(void* p, std::size_t n) {
  SPARQ_CHECK_AS(InputError, n == 0 || std::fread(p, 1, n, f) == n, "'{}': truncated checkpoint", path);
}

std::uint64_t In::left() const {
  const long at = std::ftell(f);
  SPARQ_CHECK_AS(InputError, at >= 0 && static_cast<std::uint64_t>(at) <= end, "'{}': cannot seek", path);
  return end - static_cast<std::uint64_t>(at);
}

std::uint64_t In::length(const char* what) {
  const std::uint64_t n = u64();
  SPARQ_CHECK_AS(InputError, n <= left(), "'{}': truncated checkpoint ({} of {} bytes)", path, what, n);
  return n;
}

void In::floats(std::span<float> v, const char* what) {
  const std::uint64_t n = u64();
  SPARQ_CHECK_AS(InputError, n == v.size(), "'{}': {} has {} values, this model has {} (different configuration?)",
                 path, what, n, v.size());
  bytes(v.data(), n * sizeof(float));
}

void In::skip_floats(std::uint64_t expected, const char* what) {
  const std::uint64_t n = u64();
  SPARQ_CHECK_AS(InputError, n == expected, "'{}': {} has {} values, this model has {} (different configuration?)",
                 path, what, n, expected);
  skip(n * sizeof(float), what);
}

void In::skip(std::uint64_t n, const char* what) {
  SPARQ_CHECK_AS(InputError, n <= left() && std::fseek(f, static_cast<long>(n), SEEK_CUR) == 0,
                 "'{}': truncated checkpoint ({})", path, what);
}

namespace {
Layout layout_of(const char* magic, const std::string& path) {
  if (std::memcmp(magic, kMagic, 8) == 0) return Layout::V4;
  if (std::memcmp(magic, kMagicDelta, 8) == 0) return Layout::Delta;
  if (std::memcmp(magic, kMagicV2, 8) == 0) return Layout::V2;
  SPARQ_CHECK_AS(InputError, std::memcmp(magic, kMagicV1, 8) == 0, "'{}' is not a sparq checkpoint", path);
  return Layout::V1;
}

void check_crc(In& in) {
  SPARQ_CHECK_AS(InputError, in.end >= 8 + kCrcBytes, "'{}': truncated checkpoint", in.path);
  in.end -= kCrcBytes;
  std::rewind(in.f);
  std::uint32_t crc = 0;
  std::vector<unsigned char> buf(static_cast<std::size_t>(std::min<std::uint64_t>(in.end, std::uint64_t{1} << 20)));
  for (std::uint64_t left = in.end; left > 0;) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, buf.size()));
    SPARQ_CHECK_AS(InputError, std::fread(buf.data(), 1, n, in.f) == n, "'{}': read error", in.path);
    crc = crc32(crc, buf.data(), n);
    left -= n;
  }
  SPARQ_CHECK_AS(InputError, std::fread(&in.crc, 1, kCrcBytes, in.f) == kCrcBytes && in.crc == crc,
                 "'{}': checksum mismatch: the checkpoint is corrupt or truncated", in.path);
}

// Makes the rename durable (the directory entry lives in the directory).
// Filesystems that cannot sync a directory (EINVAL) have nothing to sync.
void sync_dir(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  // Built, not assigned: g++ 12 warns falsely (-Wrestrict) on `dir = "."`.
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  SPARQ_CHECK_AS(InputError, fd >= 0, "cannot open directory '{}': {}", dir, std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  SPARQ_CHECK_AS(InputError, rc == 0 || err == EINVAL, "cannot sync directory '{}': {}", dir, std::strerror(err));
}

// Opens `tmp` for Out: with O_DIRECT where the file system takes it.
int create(const std::string& tmp) {
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_DIRECT, 0644);
  if (fd < 0 && errno == EINVAL) fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  SPARQ_CHECK_AS(InputError, fd >= 0, "cannot create '{}': {}", tmp, std::strerror(errno));
  return fd;
}

Written write_file(const std::string& tmp, const std::function<void(Out&)>& fill) {
  const int fd = create(tmp);
  Written w;
  try {
    Out o(fd, tmp);
    fill(o);
    o.finish();
    // Durable before the rename publishes it.
    SPARQ_CHECK_AS(InputError, ::fsync(fd) == 0, "write error on '{}': {}", tmp, std::strerror(errno));
    w = {o.crc, o.size};
  } catch (...) {
    ::close(fd);
    throw;
  }
  // close can still report a failed write-back (NFS).
  SPARQ_CHECK_AS(InputError, ::close(fd) == 0, "write error on '{}': {}", tmp, std::strerror(errno));
  return w;
}
}  // namespace

File open_read(In& in) {
  File f(std::fopen(in.path.c_str(), "rb"));
  SPARQ_CHECK_AS(InputError, f != nullptr, "cannot open '{}': {}", in.path, std::strerror(errno));
  in.f = f.get();
  // A delta names the file it follows: a pipe or a device there would block
  // the first read (or never end), so only a regular file is read.
  struct stat st;
  SPARQ_CHECK_AS(InputError, ::fstat(::fileno(in.f), &st) == 0 && S_ISREG(st.st_mode),
                 "'{}' is not a regular file (a checkpoint is one)", in.path);
  char magic[8];
  SPARQ_CHECK_AS(InputError, std::fread(magic, 1, 8, in.f) == 8, "'{}' is not a sparq checkpoint (too short)", in.path);
  in.layout = layout_of(magic, in.path);
  SPARQ_CHECK_AS(InputError, std::fseek(in.f, 0, SEEK_END) == 0, "'{}': cannot seek", in.path);
  const long size = std::ftell(in.f);
  SPARQ_CHECK_AS(InputError, size >= 8, "'{}': cannot seek", in.path);
  in.end = static_cast<std::uint64_t>(size);
  if (in.layout == Layout::V4 || in.layout == Layout::Delta) check_crc(in);
  SPARQ_CHECK_AS(InputError, std::fseek(in.f, 8, SEEK_SET) == 0, "'{}': cannot seek", in.path);
  return f;
}

Header read_header(In& in) {
  Header h;
  if (in.layout == Layout::Delta) {
    h.prev = in.str("the point it follows");
    in.bytes(&h.prev_crc, kCrcBytes);
  }
  h.meta = in.str("metadata");
  return h;
}

void put_header(Out& o, const char (&magic)[8], const Header& h) {
  o.bytes(magic, 8);
  if (std::memcmp(magic, kMagicDelta, 8) == 0) {
    o.str(h.prev);
    o.bytes(&h.prev_crc, kCrcBytes);
  }
  o.str(h.meta);
}

void read_rank_states(In& in, std::vector<std::vector<std::byte>>* states) {
  if (states) states->clear();
  const std::uint64_t nr = in.u64();
  for (std::uint64_t r = 0; r < nr; ++r) {
    std::vector<std::byte> b(in.length("a rank's codec state"));
    in.bytes(b.data(), b.size());
    if (states) states->push_back(std::move(b));
  }
}

void put_rank_states(Out& o, std::span<const std::vector<std::byte>> states) {
  o.u64(states.size());
  for (const auto& b : states) {
    o.u64(b.size());
    o.bytes(b.data(), b.size());
  }
}

Written write_atomic(const std::string& path, const std::function<void(Out&)>& fill) {
  const std::string tmp = path + ".tmp";
  Written w;
  try {
    w = write_file(tmp, fill);
  } catch (const Error&) {
    std::remove(tmp.c_str());  // half a file would take the space a full disk needs for the next save
    throw;
  }
  SPARQ_CHECK_AS(InputError, std::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename '{}' to '{}': {}", tmp, path,
                 std::strerror(errno));
  sync_dir(path);
  return w;
}

}  // namespace sparq::ckpt
