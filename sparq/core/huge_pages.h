#pragma once
// Memory for large arrays read at random: embedding tables (lookups hit
// random rows) and a data set's records (a shuffled epoch reads them in
// random order). On 4 KiB pages nearly every such read misses the TLB and
// walks the page tables; from 2 MiB on the array is 2 MiB-aligned and advised
// for transparent huge pages, 512x fewer entries to walk. A smaller array
// stays on normal pages: a huge page for it would hold mostly nothing, and
// with dozens of small tables per rank and 128 ranks per process that is
// gigabytes. Without THP the advice is a no-op.
#include <cstddef>
#include <memory>
#include <type_traits>

namespace sparq {

struct FreeBytes {
  std::size_t mapped = 0;  // the mapping's length; 0: from malloc
  void operator()(void* p) const;
};

// `bytes` of uninitialised memory, at least 64-byte aligned; from 2 MiB on
// a mapping of its own (`mapped` its length, else 0): a fresh one, or one
// freed while a ReuseMappings lives. Throws std::bad_alloc.
void* alloc_random_access(std::size_t bytes, std::size_t& mapped);

// While one lives, a freed mapping is kept and handed to the next request
// of its length, its pages still faulted in (huge): for a process that
// builds the same model over and over (`sparq plan` trains every plan from
// scratch: the kernel's zeroing of each new table's pages was a sixth of
// its CPU). A request of a length none has unmaps the kept ones first, so
// what is kept never adds to what the process needed before; the last
// ReuseMappings to end unmaps them all.
class ReuseMappings {
 public:
  ReuseMappings();
  ~ReuseMappings();
  ReuseMappings(const ReuseMappings&) = delete;
  ReuseMappings& operator=(const ReuseMappings&) = delete;
};
// The bytes kept for reuse now (free for this process to take).
std::size_t kept_mapping_bytes();

template <class T>
using RandomAccessArray = std::unique_ptr<T[], FreeBytes>;

// n uninitialised elements (T is trivial: nothing to construct).
template <class T>
RandomAccessArray<T> make_random_access(std::size_t n) {
  static_assert(std::is_trivial_v<T>);
  std::size_t mapped = 0;
  T* p = static_cast<T*>(alloc_random_access(n * sizeof(T), mapped));
  return RandomAccessArray<T>(p, FreeBytes{mapped});
}

}  // namespace sparq
