#pragma once
// The samples a training run reads: loaded record sets, or TSV files
// streamed each epoch (StreamBatches). Where they come from (files, the
// reference's split, a generator) is the caller's business (tools/train_data).
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sparq/data/dataset.h"
#include "sparq/data/tsv_stream.h"
#include "sparq/model/teacher.h"
#include "sparq/transport/transport.h"

namespace sparq {

struct TrainData {
  RecordSet train, test;
  // Streaming: the TSV files (plain or gzip) streamed each epoch, lines
  // [stream_begin, stream_end) across them; train stays empty.
  std::vector<std::string> stream_files;
  std::size_t stream_begin = 0, stream_end = 0;
  double drop_negatives = 0;  // --data-sub-sample-rate, applied to training lines
  std::optional<TeacherScore> teacher;  // the ceiling, when the data has one
  std::size_t bad_lines = 0;
  double load_secs = 0;
  std::string source;  // what was read, for the log (the reference's split sizes)
  bool streaming() const { return !stream_files.empty(); }
  std::size_t stream_lines() const { return stream_end - stream_begin; }
};

struct StreamOptions {
  std::size_t batch = 128;           // the global batch
  std::size_t shuffle_buffer = 0;    // records (0: the files' order)
  std::uint64_t seed = 1;
  bool skip_bad_lines = false;
};

// Batches straight from the TSV files through the background parser and a
// shuffle buffer (seeded by seed, epoch and rank), for data sets larger than
// memory. With P ranks each rank streams its own shard of the lines (blocks
// of the per-rank batch) and contributes its share of every global batch; an
// allgather of those records gives every rank the same global batch, which
// every plan expects.
class StreamBatches {
 public:
  StreamBatches(const TrainData& d, const StreamOptions& o, std::size_t epoch, Transport& peers);
  // False when no rank has a record left.
  bool next(std::size_t batch, std::span<const std::size_t> rows, Batch& out);
  std::size_t bad_lines() const { return stream_->bad_lines(); }
  std::uint64_t bytes_sent() const { return bytes_sent_; }  // the allgathers', by the transport's counters

 private:
  Transport& peers_;
  std::unique_ptr<TsvStream> stream_;
  std::vector<CriteoRecord> recs_;
  std::uint64_t bytes_sent_ = 0;
};

}  // namespace sparq
