#include "sparq/model/checkpoint_writer.h"

#include <memory>
#include <utility>

#include "sparq/model/checkpoint.h"

namespace sparq {

CheckpointWriter::~CheckpointWriter() {
  if (writer_.joinable()) writer_.join();
}

void CheckpointWriter::wait() {
  if (writer_.joinable()) writer_.join();
  if (!error_) return;
  prev_.clear();  // the next point is whole: the failed one cannot be followed
  std::rethrow_exception(std::exchange(error_, nullptr));
}

CheckpointWriter::Saved CheckpointWriter::save(const std::string& path, const Dlrm<float>& model,
                                               Optimizer<float>& opt, const std::string& meta,
                                               std::span<const std::vector<std::byte>> rank_states, bool whole) {
  wait();
  whole = whole || prev_.empty();
  Saved s{.prev = whole ? "" : prev_};
  std::vector<std::vector<std::uint32_t>> changed;
  for (std::size_t t = 0; t < model.tables().size(); ++t) {
    changed.push_back(opt.take_changed_rows(t));  // a whole checkpoint starts the count afresh too
    s.changed += changed.back().size();
    s.rows += model.tables()[t].rows();
  }
  auto image = std::make_shared<CheckpointImage>(
      whole ? whole_checkpoint_image(model, opt, meta, rank_states)
            : delta_checkpoint_image(path, prev_, prev_crc_, model, opt, changed, meta, rank_states));
  s.bytes = image->bytes.size();
  prev_ = path, prev_crc_ = image->crc;
  writer_ = std::thread([this, path, image] {
    try {
      write_checkpoint_image(path, *image);
    } catch (...) {
      error_ = std::current_exception();
    }
  });
  return s;
}

}  // namespace sparq
