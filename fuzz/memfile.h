#pragma once
// The fuzz input as a file, for readers that only take a path: an anonymous
// in-memory file (memfd), named by /proc/self/fd/N. Nothing touches the disk
// and nothing is left behind when a run is killed.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

class MemFile {
 public:
  MemFile(const void* data, std::size_t size) : fd_(::memfd_create("fuzz", 0)) {
    if (fd_ < 0 || ::write(fd_, data, size) != static_cast<ssize_t>(size)) std::abort();  // not a finding: the harness
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};
