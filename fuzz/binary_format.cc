// MappedRecords: the header checks of sparq's binary data format, then every
// record read (what a batch would touch).
#include <cstddef>
#include <cstdint>

#include "fuzz/memfile.h"
#include "sparq/core/error.h"
#include "sparq/data/binary_format.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const MemFile f(data, size);
  try {
    const sparq::MappedRecords m(f.path());
    float sum = 0;
    for (const auto& r : m.records()) sum += r.label + static_cast<float>(r.sparse[25]);
    asm volatile("" : : "g"(sum));  // the reads must happen
  } catch (const sparq::InputError&) {
  }
  return 0;
}
