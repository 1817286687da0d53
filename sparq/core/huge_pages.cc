#include "sparq/core/huge_pages.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>

#include <sys/mman.h>

namespace sparq {

namespace {
constexpr std::size_t kHuge = std::size_t{2} << 20, kLine = 64;

struct Kept {
  std::mutex m;
  int users = 0;                             // live ReuseMappings
  std::multimap<std::size_t, void*> free;    // length -> mapping
  std::size_t bytes = 0;

  void unmap_all() {  // with m held
    for (const auto& [len, p] : free) ::munmap(p, len);
    free.clear();
    bytes = 0;
  }
};
Kept& kept() {
  static Kept* k = new Kept;  // never destroyed: an array may be freed during exit, after static destructors
  return *k;
}

// A kept mapping of exactly `len` bytes, or nullptr (then none is kept).
void* take_kept(std::size_t len) {
  Kept& k = kept();
  std::lock_guard lock(k.m);
  const auto it = k.free.find(len);
  if (it == k.free.end()) {
    k.unmap_all();
    return nullptr;
  }
  void* p = it->second;
  k.free.erase(it);
  k.bytes -= len;
  return p;
}
}  // namespace

ReuseMappings::ReuseMappings() {
  std::lock_guard lock(kept().m);
  ++kept().users;
}

ReuseMappings::~ReuseMappings() {
  Kept& k = kept();
  std::lock_guard lock(k.m);
  if (--k.users == 0) k.unmap_all();
}

std::size_t kept_mapping_bytes() {
  std::lock_guard lock(kept().m);
  return kept().bytes;
}

void FreeBytes::operator()(void* p) const {
  if (!mapped) return std::free(p);
  Kept& k = kept();
  std::lock_guard lock(k.m);
  if (k.users == 0) return void(::munmap(p, mapped));
  k.free.emplace(mapped, p);
  k.bytes += mapped;
}

void* alloc_random_access(std::size_t bytes, std::size_t& mapped) {
  mapped = 0;
  if (bytes < kHuge) {
    void* p = std::aligned_alloc(kLine, (std::max<std::size_t>(bytes, 1) + kLine - 1) / kLine * kLine);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  // A fresh mapping, never touched: malloc may hand back heap pages that an
  // earlier buffer (a data set's parse) already faulted in as 4 KiB pages,
  // and the advice does not convert those (one rank's 160 MB of records held
  // 16-32 MB in huge pages that way). Mapped 2 MiB longer, then trimmed to a
  // 2 MiB-aligned start.
  const std::size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
  if (void* reused = take_kept(rounded)) {
    mapped = rounded;
    return reused;
  }
  void* m = ::mmap(nullptr, rounded + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  auto* base = static_cast<char*>(m);
  char* p = base + (kHuge - reinterpret_cast<std::uintptr_t>(base) % kHuge) % kHuge;
  if (p > base) ::munmap(base, static_cast<std::size_t>(p - base));
  if (char* end = base + rounded + kHuge; p + rounded < end)
    ::munmap(p + rounded, static_cast<std::size_t>(end - (p + rounded)));
#ifdef MADV_HUGEPAGE
  ::madvise(p, rounded, MADV_HUGEPAGE);  // before the first touch: huge from the start
#endif
  mapped = rounded;
  return p;
}

}  // namespace sparq
