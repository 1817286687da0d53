#include "sparq/core/huge_pages.h"

#include <algorithm>
#include <cstdlib>
#include <new>

#include <sys/mman.h>

namespace sparq {

void FreeBytes::operator()(void* p) const { std::free(p); }

void* alloc_random_access(std::size_t bytes) {
  constexpr std::size_t kHuge = std::size_t{2} << 20, kLine = 64;
  const std::size_t align = bytes >= kHuge ? kHuge : kLine;
  const std::size_t rounded = (std::max<std::size_t>(bytes, 1) + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (p == nullptr) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  // Before the first touch, so that the pages are huge from the start.
  if (align == kHuge) ::madvise(p, rounded, MADV_HUGEPAGE);
#endif
  return p;
}

}  // namespace sparq
