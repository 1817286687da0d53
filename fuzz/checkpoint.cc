// load_checkpoint() (and the configuration in its metadata) of a small model
// with optimizer state. With the first byte odd, the input gets the CRC-32
// trailer of the SPARQCK4 layout appended, so the fuzzer gets past the
// checksum into the parser; even, it is the file as is (the checksum and the
// unchecked SPARQCK1/2 layouts).
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz/memfile.h"
#include "sparq/core/error.h"
#include "sparq/model/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sparq;
  if (size == 0) return 0;
  // A small model (its checkpoints are about 1 KB: a fast target); the
  // seeds in fuzz/corpus/checkpoint were saved from it, with two ranks'
  // codec states.
  static DlrmConfig cfg{.bot_mlp = {2, 2}, .top_mlp = {2, 1}, .table_rows = {3, 2}, .emb_dim = 2};
  static Dlrm<float> model(cfg, 1);
  static Optimizer<float> opt({.embedding = EmbeddingOptim::RowwiseAdagrad, .dense = DenseOptim::Adam}, model);
  std::vector<std::uint8_t> file(data + 1, data + size);
  if (data[0] & 1) {
    const auto crc = static_cast<std::uint32_t>(crc32(0, file.data(), static_cast<uInt>(file.size())));
    file.insert(file.end(), reinterpret_cast<const std::uint8_t*>(&crc), reinterpret_cast<const std::uint8_t*>(&crc) + 4);
  }
  const MemFile f(file.data(), file.size());
  try {
    std::vector<std::vector<std::byte>> states;
    const std::string meta = load_checkpoint(f.path(), model, data[0] & 2 ? &opt : nullptr, &states);
    checkpoint_config(meta, f.path());
  } catch (const InputError&) {
  }
  return 0;
}
