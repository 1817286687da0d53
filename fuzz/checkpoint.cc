// load_checkpoint() (and the configuration in its metadata) of a small model
// with optimizer state. With the first byte odd, the input gets the CRC-32
// trailer of the SPARQCK4 layout appended, so the fuzzer gets past the
// checksum into the parser; even, it is the file as is (the checksum and the
// unchecked SPARQCK1/2 layouts). With its bit 2 set, the input is a delta's
// body: it gets the delta's magic and a link to a whole checkpoint of the
// same model (in a memfd of its own, pinned by its CRC), so the fuzzer
// reaches the delta's parser past the chain's checks.
#include <unistd.h>
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <vector>

#include "fuzz/memfile.h"
#include "sparq/core/error.h"
#include "sparq/model/checkpoint.h"

namespace {
using namespace sparq;

// A small model (its checkpoints are about 1 KB: a fast target); the seeds
// in fuzz/corpus/checkpoint were saved from it, with two ranks' codec states.
Dlrm<float>& model() {
  static Dlrm<float> m(DlrmConfig{.bot_mlp = {2, 2}, .top_mlp = {2, 1}, .table_rows = {3, 2}, .emb_dim = 2}, 1);
  return m;
}
Optimizer<float>& optimizer() {
  static Optimizer<float> o({.embedding = EmbeddingOptim::RowwiseAdagrad, .dense = DenseOptim::Adam}, model());
  return o;
}

std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::vector<std::uint8_t> delta_around(const std::vector<std::uint8_t>& body) {
  static const auto base = [] {
    const std::string tmp = std::filesystem::temp_directory_path() / ("sparq_fuzz_base_" + std::to_string(::getpid()));
    save_checkpoint(tmp, model(), optimizer(), "{}");
    const std::vector<char> bytes = read_all(tmp);
    std::filesystem::remove(tmp);
    return std::make_unique<MemFile>(bytes.data(), bytes.size());
  }();
  static const std::vector<std::uint8_t> head = [] {
    const std::string link = base->path();  // absolute: it resolves from any folder
    const std::vector<char> bytes = read_all(link);
    std::vector<std::uint8_t> h{'S', 'P', 'A', 'R', 'Q', 'D', 'L', '1'};
    const std::uint64_t n = link.size();
    h.insert(h.end(), reinterpret_cast<const std::uint8_t*>(&n), reinterpret_cast<const std::uint8_t*>(&n) + 8);
    h.insert(h.end(), link.begin(), link.end());
    h.insert(h.end(), bytes.end() - 4, bytes.end());  // the base's CRC
    return h;
  }();
  std::vector<std::uint8_t> file = head;
  file.insert(file.end(), body.begin(), body.end());
  return file;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::vector<std::uint8_t> file(data + 1, data + size);
  if (data[0] & 4) file = delta_around(file);
  if (data[0] & 1) {
    const auto crc = static_cast<std::uint32_t>(crc32(0, file.data(), static_cast<uInt>(file.size())));
    file.insert(file.end(), reinterpret_cast<const std::uint8_t*>(&crc), reinterpret_cast<const std::uint8_t*>(&crc) + 4);
  }
  const MemFile f(file.data(), file.size());
  try {
    std::vector<std::vector<std::byte>> states;
    const std::string meta = load_checkpoint(f.path(), model(), data[0] & 2 ? &optimizer() : nullptr, &states);
    checkpoint_config(meta, f.path());
  } catch (const InputError&) {
  }
  return 0;
}
