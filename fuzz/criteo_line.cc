// parse_criteo_line(): one line of a Criteo TSV file. A malformed line must
// come back as false with a reason, never an exception or a crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "sparq/data/criteo.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sparq::CriteoRecord rec;
  std::string why;
  const bool ok = sparq::parse_criteo_line(std::string_view(reinterpret_cast<const char*>(data), size), rec, why);
  if (!ok && why.empty()) std::abort();
  return 0;
}
