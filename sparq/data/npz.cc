#include "sparq/data/npz.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <string_view>

#include "sparq/core/crc32.h"
#include "sparq/core/error.h"

namespace sparq {

// The zip and .npy fields are little-endian; they are copied as they are.
static_assert(std::endian::native == std::endian::little, "npz.cc assumes a little-endian host");

namespace {

struct TypeInfo {
  NpyType type;
  const char* code;  // descr without its byte-order character
  std::size_t size;
};
constexpr TypeInfo kTypes[] = {
    {NpyType::Bool, "b1", 1}, {NpyType::I8, "i1", 1},  {NpyType::I16, "i2", 2}, {NpyType::I32, "i4", 4},
    {NpyType::I64, "i8", 8},  {NpyType::U8, "u1", 1},  {NpyType::U16, "u2", 2}, {NpyType::U32, "u4", 4},
    {NpyType::U64, "u8", 8},  {NpyType::F32, "f4", 4}, {NpyType::F64, "f8", 8},
};
const TypeInfo& info(NpyType t) { return kTypes[static_cast<int>(t)]; }

template <class T>
T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

struct Closer {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

// ---- .npy header: a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
struct NpyHeader {
  NpyType type = NpyType::F32;
  bool fortran = false;
  std::vector<std::uint64_t> shape;
};

class DictParser {
 public:
  DictParser(std::string_view s, const std::string& where) : s_(s), where_(where) {}

  NpyHeader parse() {
    NpyHeader h;
    bool descr = false, order = false, shape = false;
    expect('{');
    while (skip_ws(), peek() != '}') {
      const std::string key = string_literal();
      expect(':');
      skip_ws();
      if (key == "descr") {
        SPARQ_CHECK_AS(InputError, peek() != '[', "{}: structured dtypes are not supported", where_);
        h.type = descr_type(string_literal());
        descr = true;
      } else if (key == "fortran_order") {
        h.fortran = boolean();
        order = true;
      } else if (key == "shape") {
        h.shape = tuple();
        shape = true;
      } else {
        fail(fmt::format("unexpected key '{}'", key));
      }
      skip_ws();
      if (peek() == ',') ++i_;
    }
    ++i_;
    skip_ws();
    if (i_ != s_.size()) fail("text after the dict");
    if (!descr || !order || !shape) fail("missing descr, fortran_order or shape");
    return h;
  }

 private:
  // The header is quoted on one line, its non-printable bytes as '?'.
  [[noreturn]] void fail(const std::string& why) const {
    std::string text(s_.substr(0, 120));
    while (!text.empty() && (text.back() == ' ' || text.back() == '\n')) text.pop_back();
    for (char& c : text)
      if (c < 32 || c > 126) c = '?';
    SPARQ_THROW(InputError, "{}: bad .npy header ({}): {}", where_, why, text);
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    skip_ws();
    if (peek() != c) fail(fmt::format("expected '{}' at {}", c, i_));
    ++i_;
  }
  std::string string_literal() {
    skip_ws();
    const char q = peek();
    if (q != '\'' && q != '"') fail(fmt::format("expected a string at {}", i_));
    const std::size_t end = s_.find(q, i_ + 1);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string v(s_.substr(i_ + 1, end - i_ - 1));
    i_ = end + 1;
    return v;
  }
  bool boolean() {
    for (const bool v : {true, false}) {
      const std::string_view word = v ? "True" : "False";
      if (s_.substr(i_, word.size()) == word) {
        i_ += word.size();
        return v;
      }
    }
    fail("fortran_order is neither True nor False");
  }
  std::vector<std::uint64_t> tuple() {
    std::vector<std::uint64_t> v;
    expect('(');
    while (skip_ws(), peek() != ')') {
      if (peek() < '0' || peek() > '9') fail("shape holds a non-integer");
      std::uint64_t x = 0;
      while (peek() >= '0' && peek() <= '9') {
        const std::uint64_t d = static_cast<std::uint64_t>(peek() - '0');
        if (x > (std::numeric_limits<std::uint64_t>::max() - d) / 10) fail("shape overflows");
        x = x * 10 + d;
        ++i_;
      }
      if (peek() == 'L') ++i_;  // Python 2's long suffix
      v.push_back(x);
      skip_ws();
      if (peek() == ',') ++i_;
      else if (peek() != ')') fail("malformed shape");
    }
    ++i_;
    return v;
  }
  NpyType descr_type(const std::string& d) const {
    if (d.size() == 3 && d[0] == '>' && d[2] != '1')
      SPARQ_THROW(InputError, "{}: big-endian arrays ('{}') are not supported", where_, d);
    if (d.size() == 3 && (d[0] == '<' || d[0] == '|' || d[0] == '>'))
      for (const auto& t : kTypes)
        if (d.compare(1, 2, t.code) == 0) return t.type;
    SPARQ_THROW(InputError, "{}: unsupported dtype '{}' (bool, int8-64, uint8-64, float32, float64)", where_, d);
  }

  std::string_view s_;
  const std::string& where_;
  std::size_t i_ = 0;
};

NpyArray parse_npy(std::vector<char> raw, const std::string& where) {
  constexpr char kMagic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
  SPARQ_CHECK_AS(InputError, raw.size() >= 10 && std::memcmp(raw.data(), kMagic, 6) == 0, "{}: not an .npy array",
                 where);
  const int major = static_cast<unsigned char>(raw[6]);
  SPARQ_CHECK_AS(InputError, major >= 1 && major <= 3, "{}: .npy format version {} is not supported", where, major);
  const std::size_t start = major == 1 ? 10 : 12;
  SPARQ_CHECK_AS(InputError, raw.size() >= start, "{}: truncated .npy header", where);
  const std::size_t hlen = major == 1 ? load<std::uint16_t>(raw.data() + 8) : load<std::uint32_t>(raw.data() + 8);
  SPARQ_CHECK_AS(InputError, hlen <= raw.size() - start, "{}: .npy header of {} bytes in an entry of {}", where, hlen,
                 raw.size());
  const NpyHeader h = DictParser({raw.data() + start, hlen}, where).parse();
  SPARQ_CHECK_AS(InputError, !h.fortran, "{}: Fortran-order arrays are not supported (save with C order)", where);
  std::uint64_t count = 1;
  for (auto d : h.shape) {
    SPARQ_CHECK_AS(InputError, d == 0 || count <= std::numeric_limits<std::uint64_t>::max() / d,
                   "{}: shape {} overflows", where, npy_shape_text(h.shape));
    count *= d;
  }
  const std::size_t payload = raw.size() - start - hlen;
  SPARQ_CHECK_AS(InputError, count <= payload / npy_itemsize(h.type) && count * npy_itemsize(h.type) == payload,
                 "{}: shape {} of {} needs {} elements, the entry holds {} bytes of data", where,
                 npy_shape_text(h.shape), npy_descr(h.type), count, payload);
  return NpyArray(h.type, h.shape, std::move(raw), start + hlen);
}

// ---- zip
constexpr std::uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50,
                        kEnd64Sig = 0x06064b50, kLocator64Sig = 0x07064b50;
constexpr std::uint32_t kMax32 = 0xFFFFFFFFu;

class ZipFile {
 public:
  explicit ZipFile(const std::string& path) : path_(path), f_(std::fopen(path.c_str(), "rb")) {
    SPARQ_CHECK_AS(InputError, f_ != nullptr, "cannot open '{}': {}", path, std::strerror(errno));
    SPARQ_CHECK_AS(InputError, std::fseek(f_.get(), 0, SEEK_END) == 0, "cannot seek in '{}'", path);
    const long n = std::ftell(f_.get());
    SPARQ_CHECK_AS(InputError, n >= 0, "cannot size '{}'", path);
    size_ = static_cast<std::uint64_t>(n);
  }
  std::uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // n bytes at offset, which must lie inside the file.
  void read(std::uint64_t offset, void* out, std::uint64_t n) {
    SPARQ_CHECK_AS(InputError, offset <= size_ && n <= size_ - offset,
                   "'{}': corrupt zip ({} bytes at offset {} lie past the end, {} bytes)", path_, n, offset, size_);
    if (n == 0) return;
    SPARQ_CHECK_AS(InputError,
                   std::fseek(f_.get(), static_cast<long>(offset), SEEK_SET) == 0 &&
                       std::fread(out, 1, n, f_.get()) == n,
                   "read error on '{}'", path_);
  }
  std::vector<char> read(std::uint64_t offset, std::uint64_t n) {
    SPARQ_CHECK_AS(InputError, offset <= size_ && n <= size_ - offset,
                   "'{}': corrupt zip ({} bytes at offset {} lie past the end, {} bytes)", path_, n, offset, size_);
    std::vector<char> v(n);
    read(offset, v.data(), n);
    return v;
  }

 private:
  std::string path_;
  std::unique_ptr<std::FILE, Closer> f_;
  std::uint64_t size_ = 0;
};

struct CentralEntry {
  std::string name;
  std::uint16_t method = 0, flags = 0;
  std::uint32_t crc = 0;
  std::uint64_t csize = 0, usize = 0, offset = 0;
};

struct Directory {
  std::uint64_t entries = 0, size = 0, offset = 0;
};

// The end of central directory record (and its zip64 twin when present).
Directory find_directory(ZipFile& z) {
  const std::uint64_t tail = std::min<std::uint64_t>(z.size(), 22 + 0xFFFF);
  const std::vector<char> t = z.read(z.size() - tail, tail);
  std::size_t at = std::string::npos;
  for (std::size_t i = tail >= 22 ? tail - 22 + 1 : 0; i-- > 0;)
    if (load<std::uint32_t>(t.data() + i) == kEndSig) {
      at = i;
      break;
    }
  SPARQ_CHECK_AS(InputError, at != std::string::npos, "'{}': not a zip file (no end of central directory)", z.path());
  const char* e = t.data() + at;
  SPARQ_CHECK_AS(InputError, load<std::uint16_t>(e + 4) == 0 && load<std::uint16_t>(e + 6) == 0,
                 "'{}': multi-disk zip files are not supported", z.path());
  Directory d{load<std::uint16_t>(e + 10), load<std::uint32_t>(e + 12), load<std::uint32_t>(e + 16)};
  const std::uint64_t end_pos = z.size() - tail + at;
  if (end_pos >= 20) {
    char loc[20];
    z.read(end_pos - 20, loc, 20);
    if (load<std::uint32_t>(loc) == kLocator64Sig) {
      char r[56];
      z.read(load<std::uint64_t>(loc + 8), r, 56);
      SPARQ_CHECK_AS(InputError, load<std::uint32_t>(r) == kEnd64Sig, "'{}': corrupt zip64 end record", z.path());
      d = {load<std::uint64_t>(r + 32), load<std::uint64_t>(r + 40), load<std::uint64_t>(r + 48)};
    }
  }
  SPARQ_CHECK_AS(InputError, d.offset <= end_pos && d.size <= end_pos - d.offset && d.entries <= d.size / 46,
                 "'{}': corrupt zip (central directory of {} entries, {} bytes at {})", z.path(), d.entries, d.size,
                 d.offset);
  return d;
}

std::vector<CentralEntry> read_directory(ZipFile& z) {
  const Directory d = find_directory(z);
  const std::vector<char> cd = z.read(d.offset, d.size);
  std::vector<CentralEntry> out;
  std::size_t p = 0;
  for (std::uint64_t k = 0; k < d.entries; ++k) {
    SPARQ_CHECK_AS(InputError, p + 46 <= cd.size() && load<std::uint32_t>(cd.data() + p) == kCentralSig,
                   "'{}': corrupt zip (central directory entry {})", z.path(), k);
    const char* e = cd.data() + p;
    CentralEntry c;
    c.flags = load<std::uint16_t>(e + 8);
    c.method = load<std::uint16_t>(e + 10);
    c.crc = load<std::uint32_t>(e + 16);
    c.csize = load<std::uint32_t>(e + 20);
    c.usize = load<std::uint32_t>(e + 24);
    const std::size_t nlen = load<std::uint16_t>(e + 28), xlen = load<std::uint16_t>(e + 30),
                      clen = load<std::uint16_t>(e + 32);
    c.offset = load<std::uint32_t>(e + 42);
    SPARQ_CHECK_AS(InputError, p + 46 + nlen + xlen + clen <= cd.size(), "'{}': corrupt zip (central directory entry {})",
                   z.path(), k);
    c.name.assign(e + 46, nlen);
    // The zip64 extra field holds, in this order, those of the three values
    // whose 32-bit field is 0xFFFFFFFF.
    for (std::size_t x = 0; x + 4 <= xlen;) {
      const char* b = e + 46 + nlen + x;
      const std::size_t id = load<std::uint16_t>(b), len = load<std::uint16_t>(b + 2);
      SPARQ_CHECK_AS(InputError, x + 4 + len <= xlen, "'{}': corrupt zip (extra field of '{}')", z.path(), c.name);
      if (id == 0x0001) {
        std::size_t q = 4;
        for (std::uint64_t* v : {&c.usize, &c.csize, &c.offset})
          if (*v == kMax32) {
            SPARQ_CHECK_AS(InputError, q + 8 <= 4 + len, "'{}': corrupt zip (zip64 field of '{}')", z.path(), c.name);
            *v = load<std::uint64_t>(b + q);
            q += 8;
          }
      }
      x += 4 + len;
    }
    out.push_back(std::move(c));
    p += 46 + nlen + xlen + clen;
  }
  return out;
}

std::vector<char> inflate_entry(ZipFile& z, std::uint64_t at, const CentralEntry& c, const std::string& where) {
  // Deflate expands at most ~1032x: a larger claim is a corrupt directory,
  // refused before allocating for it.
  SPARQ_CHECK_AS(InputError, c.usize / 1032 <= c.csize + 1, "{}: corrupt zip ({} bytes claimed from {} compressed)",
                 where, c.usize, c.csize);
  std::vector<char> out(c.usize);
  z_stream s{};
  SPARQ_CHECK(inflateInit2(&s, -MAX_WBITS) == Z_OK, "inflateInit2");
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&s, inflateEnd);
  std::vector<char> in(std::min<std::uint64_t>(c.csize, 1 << 20));
  std::uint64_t done_in = 0, done_out = 0;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (s.avail_in == 0) {
      SPARQ_CHECK_AS(InputError, done_in < c.csize, "{}: truncated deflate stream", where);
      const std::uint64_t n = std::min<std::uint64_t>(in.size(), c.csize - done_in);
      z.read(at + done_in, in.data(), n);
      done_in += n;
      s.next_in = reinterpret_cast<Bytef*>(in.data());
      s.avail_in = static_cast<uInt>(n);
    }
    const std::uint64_t room = std::min<std::uint64_t>(c.usize - done_out, 1u << 30);
    s.next_out = reinterpret_cast<Bytef*>(out.data() + done_out);
    s.avail_out = static_cast<uInt>(room);
    rc = inflate(&s, Z_NO_FLUSH);
    done_out += room - s.avail_out;
    // Z_BUF_ERROR: no progress possible, i.e. the output is full before the
    // stream's end (longer than the directory says).
    SPARQ_CHECK_AS(InputError, rc == Z_OK || rc == Z_STREAM_END, "{}: corrupt deflate data ({})", where,
                   s.msg ? s.msg : "more data than the directory says");
  }
  SPARQ_CHECK_AS(InputError, done_out == c.usize, "{}: inflated to {} bytes, the directory says {}", where, done_out,
                 c.usize);
  return out;
}

}  // namespace

std::size_t npy_itemsize(NpyType t) { return info(t).size; }

const char* npy_descr(NpyType t) {
  static const char* d[] = {"|b1", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "<f4", "<f8"};
  return d[static_cast<int>(t)];
}

bool npy_is_integer(NpyType t) { return t != NpyType::F32 && t != NpyType::F64; }

std::string npy_shape_text(const std::vector<std::uint64_t>& shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

NpyArray::NpyArray(NpyType type, std::vector<std::uint64_t> shape, std::vector<char> raw, std::size_t offset)
    : type_(type), shape_(std::move(shape)), raw_(std::move(raw)), offset_(offset) {
  count_ = 1;
  for (auto d : shape_) count_ *= d;
  SPARQ_CHECK(offset_ <= raw_.size() && count_ * npy_itemsize(type_) == raw_.size() - offset_,
              "array of {} elements in {} bytes", count_, raw_.size() - offset_);
}

std::int64_t NpyArray::int_at(std::uint64_t i) const {
  const char* p = data() + i * npy_itemsize(type_);
  switch (type_) {
    case NpyType::Bool: return *p != 0;
    case NpyType::I8: return load<std::int8_t>(p);
    case NpyType::I16: return load<std::int16_t>(p);
    case NpyType::I32: return load<std::int32_t>(p);
    case NpyType::I64: return load<std::int64_t>(p);
    case NpyType::U8: return load<std::uint8_t>(p);
    case NpyType::U16: return load<std::uint16_t>(p);
    case NpyType::U32: return load<std::uint32_t>(p);
    case NpyType::U64: return static_cast<std::int64_t>(load<std::uint64_t>(p));
    case NpyType::F32: return static_cast<std::int64_t>(load<float>(p));
    case NpyType::F64: return static_cast<std::int64_t>(load<double>(p));
  }
  return 0;
}

double NpyArray::real_at(std::uint64_t i) const {
  const char* p = data() + i * npy_itemsize(type_);
  switch (type_) {
    case NpyType::F32: return load<float>(p);
    case NpyType::F64: return load<double>(p);
    case NpyType::U64: return static_cast<double>(load<std::uint64_t>(p));
    default: return static_cast<double>(int_at(i));
  }
}

std::map<std::string, NpyArray> read_npz(const std::string& path) {
  ZipFile z(path);
  std::map<std::string, NpyArray> out;
  for (const CentralEntry& c : read_directory(z)) {
    const std::string where = fmt::format("'{}', array '{}'", path, c.name);
    SPARQ_CHECK_AS(InputError, c.name.size() > 4 && c.name.ends_with(".npy"), "{}: not an .npy entry", where);
    SPARQ_CHECK_AS(InputError, (c.flags & 1) == 0, "{}: encrypted entries are not supported", where);
    SPARQ_CHECK_AS(InputError, c.method == 0 || c.method == 8,
                   "{}: compression method {} is not supported (stored or deflated only)", where, c.method);
    char local[30];
    z.read(c.offset, local, 30);
    SPARQ_CHECK_AS(InputError, load<std::uint32_t>(local) == kLocalSig, "{}: corrupt zip (no local header at {})",
                   where, c.offset);
    // Sizes come from the central directory: numpy's local headers hold
    // 0xFFFFFFFF there (zip64) and the real values in their extra field.
    const std::uint64_t at = c.offset + 30 + load<std::uint16_t>(local + 26) + load<std::uint16_t>(local + 28);
    SPARQ_CHECK_AS(InputError, at <= z.size() && c.csize <= z.size() - at,
                   "{}: corrupt zip ({} bytes of data at {} lie past the end)", where, c.csize, at);
    std::vector<char> raw;
    if (c.method == 0) {
      SPARQ_CHECK_AS(InputError, c.usize == c.csize, "{}: stored entry of {} bytes claims {}", where, c.csize, c.usize);
      raw = z.read(at, c.csize);
    } else {
      raw = inflate_entry(z, at, c, where);
    }
    const std::uint32_t crc = sparq::crc32(0, raw.data(), raw.size());
    SPARQ_CHECK_AS(InputError, crc == c.crc, "{}: CRC-32 mismatch (corrupt file)", where);
    std::string name = c.name.substr(0, c.name.size() - 4);
    SPARQ_CHECK_AS(InputError, !out.contains(name), "{}: the archive holds it twice", where);
    out.emplace(std::move(name), parse_npy(std::move(raw), where));
  }
  return out;
}

bool is_zip(const std::string& path) {
  std::unique_ptr<std::FILE, Closer> f(std::fopen(path.c_str(), "rb"));
  char m[4];
  return f && std::fread(m, 1, 4, f.get()) == 4 && load<std::uint32_t>(m) == kLocalSig;
}

// ---- writer
NpzWriter::NpzWriter(const std::string& path) : path_(path), tmp_(path + ".tmp") {
  f_ = std::fopen(tmp_.c_str(), "wb");
  SPARQ_CHECK_AS(InputError, f_ != nullptr, "cannot create '{}': {}", tmp_, std::strerror(errno));
}

NpzWriter::~NpzWriter() {
  if (f_) {
    std::fclose(f_);
    std::remove(tmp_.c_str());
  }
}

void NpzWriter::bytes(const void* p, std::size_t n) {
  SPARQ_CHECK_AS(InputError, n == 0 || std::fwrite(p, 1, n, f_) == n, "write error on '{}': {}", tmp_,
                 std::strerror(errno));
  pos_ += n;
}

namespace {
template <class T>
void put(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof v);
}
}  // namespace

void NpzWriter::add(const std::string& name, NpyType type, const std::vector<std::uint64_t>& shape,
                    const void* data) {
  SPARQ_CHECK(f_ != nullptr, "add after finish");
  std::uint64_t count = 1;
  for (auto d : shape) count *= d;
  const std::uint64_t nbytes = count * npy_itemsize(type);
  // Version 1 header, padded with spaces so the data starts 64-byte aligned.
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", npy_descr(type),
                                 npy_shape_text(shape));
  dict.append(63 - (10 + dict.size()) % 64, ' ');
  dict += '\n';
  std::string npy("\x93NUMPY\x01\x00", 8);
  put(npy, static_cast<std::uint16_t>(dict.size()));
  npy += dict;
  const std::string file = name + ".npy";
  const std::uint64_t size = npy.size() + nbytes;
  SPARQ_CHECK_AS(InputError, pos_ + 30 + file.size() + size < kMax32,
                 "'{}': array '{}' would take the archive past 4 GiB (zip64 is not written)", path_, name);
  const std::uint32_t crc = sparq::crc32(sparq::crc32(0, npy.data(), npy.size()), data, nbytes);
  entries_.push_back({file, crc, static_cast<std::uint32_t>(size), static_cast<std::uint32_t>(pos_)});
  std::string h;
  put(h, kLocalSig);
  put(h, std::uint16_t{20});      // version needed
  put(h, std::uint16_t{0});       // flags
  put(h, std::uint16_t{0});       // stored
  put(h, std::uint16_t{0});       // time 00:00
  put(h, std::uint16_t{0x21});    // date 1980-01-01
  put(h, crc);
  put(h, static_cast<std::uint32_t>(size));
  put(h, static_cast<std::uint32_t>(size));
  put(h, static_cast<std::uint16_t>(file.size()));
  put(h, std::uint16_t{0});
  h += file;
  bytes(h.data(), h.size());
  bytes(npy.data(), npy.size());
  bytes(data, nbytes);
}

void NpzWriter::add(const std::string& name, const std::vector<std::uint64_t>& shape, std::span<const float> v) {
  add(name, NpyType::F32, shape, v.data());
}
void NpzWriter::add(const std::string& name, const std::vector<std::uint64_t>& shape,
                    std::span<const std::int32_t> v) {
  add(name, NpyType::I32, shape, v.data());
}
void NpzWriter::add(const std::string& name, const std::vector<std::uint64_t>& shape,
                    std::span<const std::int64_t> v) {
  add(name, NpyType::I64, shape, v.data());
}

void NpzWriter::finish() {
  SPARQ_CHECK(f_ != nullptr, "finish twice");
  const std::uint64_t cd_start = pos_;
  std::string cd;
  for (const Entry& e : entries_) {
    put(cd, kCentralSig);
    put(cd, std::uint16_t{20});  // made by
    put(cd, std::uint16_t{20});  // needed
    put(cd, std::uint16_t{0});
    put(cd, std::uint16_t{0});
    put(cd, std::uint16_t{0});
    put(cd, std::uint16_t{0x21});
    put(cd, e.crc);
    put(cd, e.size);
    put(cd, e.size);
    put(cd, static_cast<std::uint16_t>(e.name.size()));
    put(cd, std::uint16_t{0});       // extra
    put(cd, std::uint16_t{0});       // comment
    put(cd, std::uint16_t{0});       // disk
    put(cd, std::uint16_t{0});       // internal attributes
    put(cd, std::uint32_t{0600u << 16});  // external: a regular file, rw-------
    put(cd, e.offset);
    cd += e.name;
  }
  SPARQ_CHECK_AS(InputError, entries_.size() < 0xFFFF && cd_start + cd.size() < kMax32,
                 "'{}': too large for a zip without zip64", path_);
  const auto dir_size = static_cast<std::uint32_t>(cd.size());
  put(cd, kEndSig);
  put(cd, std::uint16_t{0});
  put(cd, std::uint16_t{0});
  put(cd, static_cast<std::uint16_t>(entries_.size()));
  put(cd, static_cast<std::uint16_t>(entries_.size()));
  put(cd, dir_size);
  put(cd, static_cast<std::uint32_t>(cd_start));
  put(cd, std::uint16_t{0});  // comment
  bytes(cd.data(), cd.size());
  const bool closed = std::fclose(f_) == 0;
  f_ = nullptr;
  if (!closed || std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    std::remove(tmp_.c_str());
    SPARQ_THROW(InputError, "cannot write '{}': {}", path_, std::strerror(errno));
  }
}

}  // namespace sparq
