// read_libsvm(): the text of a libsvm file, read whole or as one shard of up
// to 4, strict or skipping bad lines, with or without a feature bound. The
// first byte picks the options; the rest is the file.
#include <cstddef>
#include <cstdint>

#include "fuzz/memfile.h"
#include "sparq/core/error.h"
#include "sparq/data/libsvm.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t o = data[0];
  const MemFile f(data + 1, size - 1);
  sparq::LibsvmOptions opts;
  opts.shards = 1 + (o & 3);
  opts.shard = (o >> 2) % opts.shards;
  opts.skip_bad_lines = o & 16;
  opts.num_features = o & 32 ? 50 : 0;
  opts.drop_beyond = o & 64;
  try {
    const sparq::LibsvmRead r = sparq::read_libsvm(f.path(), opts);
    float sum = 0;  // every row read back, as the trainer would
    for (std::size_t i = 0; i < r.rows.rows(); ++i)
      for (float v : r.rows.row_values(i)) sum += v;
    asm volatile("" : : "g"(sum));
  } catch (const sparq::InputError&) {
  }
  return 0;
}
