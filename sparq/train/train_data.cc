#include "sparq/train/train_data.h"

#include <cstring>

#include "sparq/coll/blob_allgather.h"
#include "sparq/coll/call.h"
#include "sparq/coll/patterns.h"
#include "sparq/core/error.h"

namespace sparq {

StreamBatches::StreamBatches(const TrainData& d, const StreamOptions& so, std::size_t epoch, Transport& peers)
    : peers_(peers) {
  TsvOptions o;
  o.skip_bad_lines = so.skip_bad_lines;
  o.shuffle_buffer = so.shuffle_buffer;
  o.seed = so.seed * 1000003 + epoch + (peers.size() > 1 ? 7919 * static_cast<std::uint64_t>(peers.rank()) : 0);
  o.rank = peers.rank();
  o.nranks = peers.size();
  o.shard_block = pattern::Partition{so.batch, peers.size()}.max_len();
  o.first_line = d.stream_begin;
  o.end_line = d.stream_end;
  o.drop_negatives = d.drop_negatives;
  o.sample_seed = so.seed;
  stream_ = std::make_unique<TsvStream>(d.stream_files, o);
}

bool StreamBatches::next(std::size_t batch, std::span<const std::size_t> rows, Batch& out) {
  const int P = peers_.size();
  const std::size_t mine = pattern::Partition{batch, P}.len(peers_.rank());
  recs_.clear();
  CriteoRecord r;
  while (recs_.size() < mine && stream_->next(r)) recs_.push_back(r);
  if (P > 1) {
    const auto bytes = std::as_bytes(std::span<const CriteoRecord>(recs_));
    Call c(peers_, "streamed batch", tags::kStreamBatch, Millis{0});
    const std::vector<Blob> all = allgather_blobs(c, Blob(bytes.begin(), bytes.end()));
    bytes_sent_ += c.finish("bruck").wire.bytes_sent;
    recs_.clear();
    const pattern::Partition shares{batch, P};
    for (int q = 0; q < P; ++q) {
      const Blob& b = all[static_cast<std::size_t>(q)];
      SPARQ_CHECK_AS(WireError,
                     b.size() % sizeof(CriteoRecord) == 0 && b.size() / sizeof(CriteoRecord) <= shares.len(q),
                     "streamed batch: rank {} sent {} bytes, not up to {} records", q, b.size(), shares.len(q));
      const std::size_t n = b.size() / sizeof(CriteoRecord);
      if (n == 0) continue;  // that rank's stream has ended
      recs_.resize(recs_.size() + n);
      std::memcpy(recs_.data() + recs_.size() - n, b.data(), b.size());
    }
  }
  if (recs_.empty()) return false;
  make_batch(recs_, {}, 0, recs_.size(), rows, out);
  return true;
}

}  // namespace sparq
