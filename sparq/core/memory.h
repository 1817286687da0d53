#pragma once
// Memory a run can still take, so that sizes which cannot fit fail up front
// with the numbers instead of as an allocation failure or the OOM killer
// midway through (Linux overcommits: a huge table "allocates" and dies when
// first written).
#include <cstdint>
#include <string_view>

namespace sparq {

// MemAvailable from /proc/meminfo, or what is left under this process's
// cgroup memory limit (v2 memory.max - memory.current, v1
// limit_in_bytes - usage_in_bytes) when that is lower; and the mappings this
// process keeps for reuse (huge_pages.h).
std::uint64_t available_memory();

// Throws InputError "needs N GiB for WHAT, M GiB available" unless `bytes`
// fit in available_memory(). `bytes` is a double: estimates of absurd sizes
// (rows x dim x ranks) must not wrap around.
void check_memory(double bytes, std::string_view what);

// This process's peak resident set (VmHWM from /proc/self/status), in bytes;
// 0 where the kernel does not say.
std::uint64_t peak_resident_memory();

}  // namespace sparq
