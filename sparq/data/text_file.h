#pragma once
// Reading a text file that may be gzip-compressed (Criteo Terabyte's
// day_N.gz): zlib reads plain files unchanged and inflates gzip ones while
// streaming, so a 1 TB data set never needs unpacking. A truncated or
// corrupt gzip stream is an InputError naming the file, never a short read
// taken for the end of the data.
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace sparq {

class TextFile {
 public:
  explicit TextFile(const std::string& path);  // InputError when it cannot be opened
  ~TextFile();
  TextFile(const TextFile&) = delete;
  TextFile& operator=(const TextFile&) = delete;

  // Up to n bytes into buf; 0 at the end of the data.
  std::size_t read(char* buf, std::size_t n);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  void* gz_;  // gzFile (zlib.h stays out of this header)
};

// Calls `line` on each line of f in order, without its '\n' (a last line
// without '\n' counts too), until it returns false; returns false if it did.
bool for_each_line(TextFile& f, const std::function<bool(std::string_view)>& line);

// Lines of a (possibly gzip) text file; a last line without '\n' counts.
std::size_t count_lines(const std::string& path);

}  // namespace sparq
