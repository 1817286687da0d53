// Large random-access arrays live in a mapping of their own, 2 MiB-aligned
// and advised for huge pages before anything touches them; small ones come
// from malloc.
#include "sparq/core/huge_pages.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace sparq {
namespace {

// The /proc/self/smaps entry of the mapping that starts at p: its size in
// kB and its VmFlags line, or size 0 if no mapping starts there.
struct Vma {
  std::size_t kb = 0;
  std::string flags;
};
Vma mapping_at(const void* p) {
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool mine = false;
  Vma v;
  while (std::getline(in, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    if (std::istringstream(line) >> std::hex >> lo >> dash >> hi && dash == '-') {
      mine = lo == reinterpret_cast<std::uintptr_t>(p);
      if (mine) v.kb = (hi - lo) / 1024;
    } else if (mine && line.rfind("VmFlags:", 0) == 0) {
      v.flags = line;
    }
  }
  return v;
}

TEST(HugePages, LargeArraysAreAlignedFreshMappingsAdvisedForHugePages) {
  const std::size_t n = (5u << 20) / sizeof(float) + 3;  // 5 MiB and a bit: rounded up to 6 MiB
  RandomAccessArray<float> a = make_random_access<float>(n);
  ASSERT_NE(a.get(), nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.get()) % (2u << 20), 0u);
  EXPECT_EQ(a.get_deleter().mapped, 6u << 20);
  for (std::size_t i = 0; i < n; ++i) a[i] = static_cast<float>(i);
  for (std::size_t i = 0; i < n; i += 4099) ASSERT_EQ(a[i], static_cast<float>(i));
  const Vma v = mapping_at(a.get());
  EXPECT_EQ(v.kb, 6u << 10) << "not a mapping of its own, trimmed to the rounded size";
#ifdef MADV_HUGEPAGE
  if (std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled").good()) {
    EXPECT_NE(v.flags.find(" hg"), std::string::npos) << v.flags;
  }
#endif
  const void* p = a.get();
  a.reset();
  EXPECT_EQ(mapping_at(p).kb, 0u) << "still mapped after the array was freed";
}

TEST(HugePages, WhileReuseLivesAFreedMappingServesTheNextOfItsLength) {
  const std::size_t n = (4u << 20) / sizeof(float);
  const void* first = nullptr;
  {
    ReuseMappings reuse;
    RandomAccessArray<float> a = make_random_access<float>(n);
    first = a.get();
    a[0] = 7;
    a.reset();
    EXPECT_EQ(kept_mapping_bytes(), 4u << 20);
    EXPECT_EQ(mapping_at(first).kb, 4u << 10) << "kept mapped for reuse";
    RandomAccessArray<float> b = make_random_access<float>(n);
    EXPECT_EQ(b.get(), first);
    EXPECT_EQ(b[0], 7) << "the same pages, not fresh ones";
    EXPECT_EQ(kept_mapping_bytes(), 0u);
    b.reset();
    RandomAccessArray<float> c = make_random_access<float>(2 * n);  // no such length kept: all are unmapped
    EXPECT_EQ(kept_mapping_bytes(), 0u);
    EXPECT_NE(mapping_at(first).kb, 4u << 10);
    c.reset();
    EXPECT_EQ(kept_mapping_bytes(), 8u << 20);
  }
  EXPECT_EQ(kept_mapping_bytes(), 0u) << "the last ReuseMappings unmaps what it kept";
}

TEST(HugePages, SmallArraysComeFromMalloc) {
  RandomAccessArray<double> a = make_random_access<double>(1000);
  ASSERT_NE(a.get(), nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.get()) % 64, 0u);
  EXPECT_EQ(a.get_deleter().mapped, 0u);
  a[999] = 1.5;
  EXPECT_EQ(a[999], 1.5);
}

}  // namespace
}  // namespace sparq
