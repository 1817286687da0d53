#pragma once
// Where `sparq train` gets its samples: data files (TSV or binary), a TSV
// streamed each epoch, or generated (synthetic with a teacher, or random).
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sparq/data/dataset.h"
#include "sparq/data/tsv_stream.h"
#include "sparq/model/dlrm.h"
#include "sparq/model/teacher.h"
#include "tools/synthetic_data.h"
#include "tools/train_args.h"

namespace sparq::cli {

struct Data {
  RecordSet train, test;
  std::string stream_file;   // --stream: the TSV to stream each epoch (train stays empty)
  std::size_t stream_lines = 0;
  std::optional<TeacherScore> teacher;  // the ceiling, when the data has one
  std::size_t bad_lines = 0;
  double load_secs = 0;
};

Data load_data(const TrainArgs& a, const DlrmConfig& cfg);

// --stream: batches straight from the TSV through the background parser and a
// shuffle buffer (seeded by seed and epoch), for data sets larger than memory.
class StreamBatches {
 public:
  StreamBatches(const std::string& file, const TrainArgs& a, std::size_t epoch) {
    TsvOptions o;
    o.skip_bad_lines = a.skip_bad_lines;
    o.shuffle_buffer = a.no_shuffle ? 0 : a.shuffle_buffer;
    o.seed = a.seed * 1000003 + epoch;
    o.shard_block = a.batch;
    stream_ = std::make_unique<TsvStream>(std::vector<std::string>{file}, o);
  }
  // False when the stream has no record left.
  bool next(std::size_t batch, std::span<const std::size_t> rows, Batch& out) {
    recs_.clear();
    CriteoRecord r;
    while (recs_.size() < batch && stream_->next(r)) recs_.push_back(r);
    if (recs_.empty()) return false;
    make_batch(recs_, {}, 0, recs_.size(), rows, out);
    return true;
  }
  std::size_t bad_lines() const { return stream_->bad_lines(); }

 private:
  std::unique_ptr<TsvStream> stream_;
  std::vector<CriteoRecord> recs_;
};

}  // namespace sparq::cli
