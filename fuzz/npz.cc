// read_npz() (zip directory, zip64, deflate, .npy headers) and, on what it
// accepts, read_criteo_npz() (the reference's X_int / X_cat / y arrays).
#include <cstddef>
#include <cstdint>

#include "fuzz/memfile.h"
#include "sparq/core/error.h"
#include "sparq/data/criteo_npz.h"
#include "sparq/data/npz.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const MemFile f(data, size);
  try {
    for (const auto& [name, a] : sparq::read_npz(f.path()))
      if (a.count() > 0) (void)(sparq::npy_is_integer(a.type()) ? a.int_at(a.count() - 1) : a.real_at(0));
    sparq::read_criteo_npz(f.path());
  } catch (const sparq::InputError&) {
  }
  return 0;
}
