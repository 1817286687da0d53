#include "sparq/data/text_file.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <vector>

#include "sparq/core/error.h"

namespace sparq {

TextFile::TextFile(const std::string& path) : path_(path), gz_(gzopen(path.c_str(), "rb")) {
  SPARQ_CHECK_AS(InputError, gz_ != nullptr, "cannot open '{}': {}", path, std::strerror(errno ? errno : ENOMEM));
  gzbuffer(static_cast<gzFile>(gz_), 1 << 18);
}

TextFile::~TextFile() { gzclose(static_cast<gzFile>(gz_)); }

std::size_t TextFile::read(char* buf, std::size_t n) {
  auto* f = static_cast<gzFile>(gz_);
  const auto want = static_cast<unsigned>(std::min<std::size_t>(n, std::numeric_limits<int>::max()));
  const int got = gzread(f, buf, want);
  int err = Z_OK;
  const char* msg = gzerror(f, &err);
  // zlib reports a gzip stream cut short as Z_BUF_ERROR once the input ends.
  SPARQ_CHECK_AS(InputError, got >= 0 && (err == Z_OK || err == Z_STREAM_END),
                 "'{}': {} (truncated or corrupt gzip file?)", path_,
                 err == Z_ERRNO ? std::strerror(errno) : msg);
  return static_cast<std::size_t>(got);
}

bool for_each_line(TextFile& f, const std::function<bool(std::string_view)>& line) {
  std::vector<char> buf(1 << 20);
  std::string carry;  // a line split across reads
  while (const std::size_t n = f.read(buf.data(), buf.size())) {
    const std::string_view chunk(buf.data(), n);
    std::size_t pos = 0;
    for (std::size_t nl; (nl = chunk.find('\n', pos)) != std::string_view::npos; pos = nl + 1) {
      if (carry.empty()) {
        if (!line(chunk.substr(pos, nl - pos))) return false;
      } else {
        carry.append(chunk.substr(pos, nl - pos));
        if (!line(carry)) return false;
        carry.clear();
      }
    }
    carry.append(chunk.substr(pos));
  }
  return carry.empty() || line(carry);
}

std::size_t count_lines(const std::string& path) {
  TextFile f(path);
  std::vector<char> buf(1 << 20);
  std::size_t n = 0, got;
  char last = '\n';
  while ((got = f.read(buf.data(), buf.size())) > 0) {
    for (const char* p = buf.data(); (p = static_cast<const char*>(std::memchr(p, '\n', buf.data() + got - p))); ++p)
      ++n;
    last = buf[got - 1];
  }
  return n + (last != '\n' ? 1 : 0);
}

}  // namespace sparq
