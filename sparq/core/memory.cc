#include "sparq/core/memory.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <string>

#include "sparq/core/error.h"
#include "sparq/core/huge_pages.h"

namespace sparq {

namespace {
constexpr std::uint64_t kNone = std::numeric_limits<std::uint64_t>::max();

// The first number in a file ("max" and a missing file: kNone).
std::uint64_t read_number(const std::string& path) {
  std::ifstream in(path);
  std::uint64_t v = 0;
  return in >> v ? v : kNone;
}

// limit - usage, kNone when there is no limit.
std::uint64_t left_under(const std::string& dir, const char* limit, const char* usage) {
  const std::uint64_t l = read_number(dir + "/" + limit), u = read_number(dir + "/" + usage);
  if (l == kNone || u == kNone) return kNone;
  return l > u ? l - u : 0;
}

// The value of a "Key:  N kB" line of a /proc file, in bytes (kNone: absent).
std::uint64_t read_kib_field(const char* path, std::string_view key) {
  std::ifstream in(path);
  for (std::string k; in >> k;) {
    std::uint64_t kib = 0;
    if (k == key) return in >> kib ? kib * 1024 : kNone;
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return kNone;
}
}  // namespace

std::uint64_t available_memory() {
  std::uint64_t avail = read_kib_field("/proc/meminfo", "MemAvailable:");
  // The cgroup's own directory (/proc/self/cgroup) on a host; the mount's
  // root inside a container, where the mount is the container's cgroup.
  std::ifstream cg("/proc/self/cgroup");
  std::string v2 = "/", v1 = "/";
  for (std::string line; std::getline(cg, line);) {
    if (line.starts_with("0::")) v2 = line.substr(3);
    if (const auto at = line.find(":memory:"); at != std::string::npos) v1 = line.substr(at + 8);
  }
  for (const std::string& dir : {"/sys/fs/cgroup" + v2, std::string("/sys/fs/cgroup")})
    avail = std::min(avail, left_under(dir, "memory.max", "memory.current"));
  for (const std::string& dir : {"/sys/fs/cgroup/memory" + v1, std::string("/sys/fs/cgroup/memory")})
    avail = std::min(avail, left_under(dir, "memory.limit_in_bytes", "memory.usage_in_bytes"));
  return avail + kept_mapping_bytes();  // kept for reuse: this process's to take
}

void check_memory(double bytes, std::string_view what) {
  const std::uint64_t avail = available_memory();
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  SPARQ_CHECK_AS(InputError, avail == kNone || bytes <= static_cast<double>(avail),
                 "needs {:.1f} GiB for {}, {:.1f} GiB available", bytes / kGiB, what,
                 static_cast<double>(avail) / kGiB);
}

std::uint64_t peak_resident_memory() {
  const std::uint64_t b = read_kib_field("/proc/self/status", "VmHWM:");
  return b == kNone ? 0 : b;
}

}  // namespace sparq
