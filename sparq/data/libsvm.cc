#include "sparq/data/libsvm.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <string_view>
#include <vector>

#include "sparq/core/error.h"
#include "sparq/data/text_file.h"

namespace sparq {
namespace {

constexpr std::size_t kBlock = std::size_t{16} << 20;  // bytes per read
// Past the end of its range a shard only finishes its last line: small reads.
constexpr std::size_t kTailRead = std::size_t{64} << 10;
constexpr std::uint64_t kIndexLimit = std::uint64_t{1} << 32;  // 1-based indices stay below
constexpr std::uint64_t kNoEnd = std::numeric_limits<std::uint64_t>::max();

// The file's bytes (inflated for gzip) from a chosen offset on. A plain file
// seeks there; gzip has no index to seek by, so its text is inflated from the
// start and the bytes before the offset are thrown away.
class ByteSource {
 public:
  explicit ByteSource(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    SPARQ_CHECK_AS(InputError, fd_ >= 0, "cannot open '{}': {}", path, std::strerror(errno));
    unsigned char magic[2] = {0, 0};
    gzip_ = ::pread(fd_, magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    if (gzip_) {
      ::close(fd_);
      fd_ = -1;
      gz_ = std::make_unique<TextFile>(path);
    }
  }
  ~ByteSource() {
    if (fd_ >= 0) ::close(fd_);
  }
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  bool gzip() const { return gzip_; }
  // Bytes of text. For gzip this inflates the whole file once (nothing kept).
  std::uint64_t size() const {
    if (!gzip_) {
      struct stat st;
      SPARQ_CHECK_AS(InputError, ::fstat(fd_, &st) == 0, "'{}': {}", path_, std::strerror(errno));
      return static_cast<std::uint64_t>(st.st_size);
    }
    TextFile f(path_);
    std::vector<char> buf(1 << 20);
    std::uint64_t n = 0;
    while (const auto got = f.read(buf.data(), buf.size())) n += got;
    return n;
  }

  // Positions the next read at `offset` (only called once, before reading).
  void seek(std::uint64_t offset) {
    if (!gzip_) {
      SPARQ_CHECK_AS(InputError, ::lseek(fd_, static_cast<off_t>(offset), SEEK_SET) >= 0, "'{}': seek: {}",
                     path_, std::strerror(errno));
      ::posix_fadvise(fd_, static_cast<off_t>(offset), 0, POSIX_FADV_SEQUENTIAL);
      return;
    }
    std::vector<char> sink(std::min<std::uint64_t>(offset, 1 << 20));
    while (offset > 0) {
      const auto got = gz_->read(sink.data(), std::min<std::uint64_t>(offset, sink.size()));
      if (got == 0) break;
      offset -= got;
    }
  }

  // Up to n bytes; 0 at the end.
  std::size_t read(char* buf, std::size_t n) {
    if (gzip_) return gz_->read(buf, n);
    for (;;) {
      const auto got = ::read(fd_, buf, n);
      if (got >= 0) return static_cast<std::size_t>(got);
      SPARQ_CHECK_AS(InputError, errno == EINTR, "'{}': read: {}", path_, std::strerror(errno));
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool gzip_ = false;
  std::unique_ptr<TextFile> gz_;
};

// Lines of the text from a start offset, out of one block buffer: a line is a
// view into the block (no copy, no allocation); the partial line at a block's
// end moves to the front before the next read; a line longer than the block
// doubles it. Reads stop at `read_end` (the shard's end) and go on in small
// steps after it, so a shard reads little beyond its range.
class LineBlocks {
 public:
  LineBlocks(ByteSource& src, std::uint64_t from, std::uint64_t read_end)
      : src_(src), base_(from), read_end_(read_end) {
    // A block for a small range is small: no 16 MiB per tiny file.
    cap_ = read_end == kNoEnd ? kBlock : std::clamp<std::uint64_t>(read_end - from + 1, 4096, kBlock);
    buf_ = std::make_unique_for_overwrite<char[]>(cap_);
  }

  // File offset of the next line's first byte.
  std::uint64_t offset() const { return base_ + pos_; }

  // The next line, without its '\n'; false at the end of the text.
  bool next(const char*& begin, const char*& end) {
    for (;;) {
      const char* p = buf_.get() + pos_;
      if (const auto* nl = static_cast<const char*>(std::memchr(p, '\n', end_ - pos_))) {
        begin = p;
        end = nl;
        pos_ = static_cast<std::size_t>(nl - buf_.get()) + 1;
        return true;
      }
      if (eof_ || !refill()) {
        if (pos_ == end_) return false;
        begin = buf_.get() + pos_;  // a last line without '\n' (refill moved it)
        end = buf_.get() + end_;
        pos_ = end_;
        return true;
      }
    }
  }

 private:
  // Appends the next read after the unfinished line; false at the end.
  bool refill() {
    std::memmove(buf_.get(), buf_.get() + pos_, end_ - pos_);
    base_ += pos_;
    end_ -= pos_;
    pos_ = 0;
    if (end_ == cap_) grow();
    const std::uint64_t at = base_ + end_;
    std::size_t want = cap_ - end_;
    if (at < read_end_) want = static_cast<std::size_t>(std::min<std::uint64_t>(want, read_end_ - at));
    else want = std::min(want, kTailRead);
    const auto got = src_.read(buf_.get() + end_, want);
    end_ += got;
    eof_ = got == 0;
    return got > 0;
  }

  void grow() {
    auto bigger = std::make_unique_for_overwrite<char[]>(cap_ * 2);
    std::memcpy(bigger.get(), buf_.get(), end_);
    buf_ = std::move(bigger);
    cap_ *= 2;
  }

  ByteSource& src_;
  std::unique_ptr<char[]> buf_;
  std::size_t cap_ = 0, pos_ = 0, end_ = 0;
  std::uint64_t base_;      // file offset of buf_[0]
  std::uint64_t read_end_;  // where full-block reads stop
  bool eof_ = false;
};

inline bool is_blank(char c) { return c == ' ' || c == '\t'; }
inline bool ends_token(const char* p, const char* q) { return p == q || is_blank(*p) || *p == '#'; }
inline const char* skip_blanks(const char* p, const char* q) {
  while (p != q && is_blank(*p)) ++p;
  return p;
}

// The token at p (up to a blank), shortened for a message.
std::string_view token(const char* p, const char* q) {
  const char* e = p;
  while (e != q && !is_blank(*e) && e - p < 64) ++e;
  return {p, static_cast<std::size_t>(e - p)};
}

// A float at p, a leading '+' allowed (strtod takes one). from_chars reports
// both overflow and underflow as out of range: strtof then tells them apart
// (underflow becomes 0 or a subnormal, as strtod's double does in LIBLINEAR;
// overflow becomes inf, which the caller rejects). nullptr when no number
// starts at p.
const char* parse_float(const char* p, const char* q, float& v) {
  if (p != q && *p == '+') {
    ++p;
    if (p != q && (*p == '-' || *p == '+')) return nullptr;
  }
  const auto [e, ec] = std::from_chars(p, q, v);
  if (ec == std::errc::result_out_of_range) [[unlikely]] {
    const std::string text(p, e);  // strtof needs a terminated string
    v = std::strtof(text.c_str(), nullptr);
  } else if (ec != std::errc{}) {
    return nullptr;
  }
  return e;
}

// Parses lines into rows; knows nothing of files or line numbers.
class LineParser {
 public:
  LineParser(const LibsvmOptions& opts, SparseRows& rows) : opts_(opts), rows_(rows) {}

  // One line without its '\n': true with its row appended, or false with the
  // rows unchanged and reason() saying why.
  bool parse(const char* p, const char* q) {
    if (p != q && q[-1] == '\r') --q;
    p = skip_blanks(p, q);
    if (p == q || *p == '#') return fail("empty line");
    float label;
    unsigned kind;
    if (!parse_label(p, q, label, kind)) return false;
    if ((kinds_ | kind) == 3) return fail("labels mix 0/1 and -1/+1 (a label 0 and a label -1 in one file)");
    const std::size_t row_start = rows_.indices.size();
    std::size_t drops = 0;
    std::uint64_t idx = 0;
    while ((p = skip_blanks(p, q)) != q && *p != '#') {
      float v;
      if (!parse_entry(p, q, idx, v)) return undo(row_start);
      if (opts_.num_features != 0 && idx > opts_.num_features) [[unlikely]] {
        if (!opts_.drop_beyond) {
          fail(fmt::format("index {} is beyond num_features {}", idx, opts_.num_features));
          return undo(row_start);
        }
        ++drops;
        continue;
      }
      rows_.indices.push_back(static_cast<std::uint32_t>(idx - 1));
      rows_.values.push_back(v);
    }
    // Indices increase, so the row's last index is its largest.
    if (rows_.indices.size() > row_start) max_index_ = std::max(max_index_, std::uint64_t{rows_.indices.back()} + 1);
    rows_.labels.push_back(label);
    rows_.offsets.push_back(rows_.indices.size());
    kinds_ |= kind;
    dropped_ += drops;
    return true;
  }

  const std::string& reason() const { return reason_; }
  unsigned kinds() const { return kinds_; }
  std::size_t dropped() const { return dropped_; }
  std::uint64_t max_index() const { return max_index_; }

 private:
  bool fail(std::string why) {
    reason_ = std::move(why);
    return false;
  }
  bool undo(std::size_t row_start) {
    rows_.indices.resize(row_start);
    rows_.values.resize(row_start);
    return false;
  }

  // The label at p: y is +1/-1, kind the label_kinds bit it sets.
  bool parse_label(const char*& p, const char* q, float& y, unsigned& kind) {
    double v = 0;
    const bool plus = *p == '+' && p + 1 != q && p[1] != '-' && p[1] != '+';
    const auto [e, ec] = std::from_chars(p + plus, q, v);
    if (ec != std::errc{} || !ends_token(e, q) || !(v == 1 || v == -1 || v == 0))
      return fail(fmt::format("label '{}' is not one of -1/+1 or 0/1", token(p, q)));
    y = v > 0 ? 1.f : -1.f;
    kind = v == 0 ? 1u : v < 0 ? 2u : 0u;
    p = e;
    return true;
  }

  // `<index>:<value>` at p, the index above the previous one (idx on entry).
  bool parse_entry(const char*& p, const char* q, std::uint64_t& idx, float& v) {
    const std::uint64_t prev = idx;
    const auto [c, ec] = std::from_chars(p, q, idx);
    if (ec == std::errc::result_out_of_range || (ec == std::errc{} && idx >= kIndexLimit))
      return fail(fmt::format("index {} is too large (at most 2^32 - 1)", std::string_view(p, c - p)));
    if (ec != std::errc{} || c == q || *c != ':')
      return fail(fmt::format("bad entry '{}' (expected <index>:<value>)", token(p, q)));
    if (idx == 0) return fail("index 0 (indices are 1-based)");
    if (idx <= prev)
      return fail(fmt::format("index {} after index {} (indices must be strictly increasing)", idx, prev));
    // Binary features ("i:1") are the common case of the big sets (url, kdd2010, webspam).
    const char* e = q - c >= 2 && c[1] == '1' && ends_token(c + 2, q) ? (v = 1.f, c + 2) : parse_float(c + 1, q, v);
    if (e == nullptr || !ends_token(e, q))
      return fail(fmt::format("bad value in '{}' (expected a float)", token(p, q)));
    if (!std::isfinite(v)) return fail(fmt::format("value in '{}' is not a finite float", token(p, q)));
    p = e;
    return true;
  }

  const LibsvmOptions& opts_;
  SparseRows& rows_;
  std::string reason_;
  unsigned kinds_ = 0;
  std::size_t dropped_ = 0;
  std::uint64_t max_index_ = 0;  // 1-based
};

// 1-based number of the line that starts at byte `offset`. Only for a line
// that is reported: it reads the file from its start.
std::size_t line_number(const std::string& path, std::uint64_t offset) {
  TextFile f(path);
  std::vector<char> buf(std::clamp<std::uint64_t>(offset, 1, 1 << 20));  // not 1 MiB for a line near the start
  std::size_t n = 1;
  while (offset > 0) {
    const auto got = f.read(buf.data(), std::min<std::uint64_t>(offset, buf.size()));
    if (got == 0) break;
    n += static_cast<std::size_t>(std::count(buf.data(), buf.data() + got, '\n'));
    offset -= got;
  }
  return n;
}

// Bytes [begin, end) of a text of `size` bytes owned by shard s of S.
std::pair<std::uint64_t, std::uint64_t> shard_range(std::uint64_t size, int s, int S) {
  // size*k/S without overflowing: size = q*S + r, and r*k < S*S fits.
  const std::uint64_t n = static_cast<std::uint64_t>(S), q = size / n, r = size % n;
  const auto at = [&](int k) { return q * static_cast<std::uint64_t>(k) + r * static_cast<std::uint64_t>(k) / n; };
  return {at(s), at(s + 1)};
}

// Throws for a bad line, or counts it (skip_bad_lines).
void report_bad(const std::string& path, const LibsvmOptions& opts, std::uint64_t start, const std::string& why,
                LibsvmRead& out) {
  if (!opts.skip_bad_lines) SPARQ_THROW(InputError, "{}:{}: {}", path, line_number(path, start), why);
  if (out.bad_lines++ == 0) out.first_bad = fmt::format("{}:{}: {}", path, line_number(path, start), why);
}

}  // namespace

LibsvmRead read_libsvm(const std::string& path, const LibsvmOptions& opts) {
  SPARQ_CHECK_AS(InputError, opts.shards >= 1 && opts.shard >= 0 && opts.shard < opts.shards,
                 "libsvm: shard {} of {} does not exist", opts.shard, opts.shards);
  LibsvmRead out;
  out.rows.num_features = opts.num_features;
  ByteSource src(path);
  // One shard owns everything: no need to learn a gzip file's size (a pass
  // over it); a plain file's is one fstat, and bounds the block a small file
  // reads into.
  const auto [begin, end] = opts.shards == 1 ? std::pair{std::uint64_t{0}, src.gzip() ? kNoEnd : src.size()}
                                             : shard_range(src.size(), opts.shard, opts.shards);
  if (begin >= end) return out;
  // From the byte before the range: the first '\n' from there ends the line a
  // shard before owns (an empty one when that byte is the '\n' itself).
  const std::uint64_t from = begin == 0 ? 0 : begin - 1;
  src.seek(from);
  LineBlocks blocks(src, from, end);
  const char *b = nullptr, *e = nullptr;
  if (begin > 0 && !blocks.next(b, e)) return out;
  LineParser parser(opts, out.rows);
  while (blocks.offset() < end) {
    const std::uint64_t start = blocks.offset();
    if (!blocks.next(b, e)) break;
    ++out.lines;
    if (!parser.parse(b, e)) [[unlikely]]
      report_bad(path, opts, start, parser.reason(), out);
  }
  out.label_kinds = parser.kinds();
  out.dropped = parser.dropped();
  if (opts.num_features == 0) out.rows.num_features = parser.max_index();
  return out;
}

void format_libsvm_row(float label, std::span<const std::uint32_t> idx, std::span<const float> val,
                       std::string& out) {
  SPARQ_CHECK(idx.size() == val.size(), "{} indices but {} values", idx.size(), val.size());
  out += label > 0 ? "+1" : "-1";
  auto it = std::back_inserter(out);
  // fmt's "{}" of a float is the shortest text that reads back to it.
  for (std::size_t i = 0; i < idx.size(); ++i) fmt::format_to(it, " {}:{}", std::uint64_t{idx[i]} + 1, val[i]);
  out += '\n';
}

}  // namespace sparq
