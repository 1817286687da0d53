#pragma once
// Streaming reader of Criteo TSV files (plain or gzip, text_file.h): a
// background thread reads and parses
// (reading is I/O, parsing is most of the cost), the consumer takes records
// through a bounded queue, optionally through a shuffle buffer.
//
// Memory: at most `queue_chunks` chunks of `chunk_records` records in flight
// (160 B each: 8 x 4096 -> 5 MiB) plus the shuffle buffer (160 B per slot).
//
// Sharding (rank r of P, a plain parameter: this layer knows nothing of
// communication): lines are numbered from 0 across the files in order, cut
// into blocks of `shard_block` lines (use the mini-batch size), and rank r
// keeps blocks r, r+P, r+2P, ... . Lines of other ranks are skipped without
// being parsed. Bad lines count in the numbering, so the split does not
// depend on the data's validity.
//
// Line range: only global lines [first_line, end_line) are read (the
// reference's day splits of one file or of day files); block numbering for
// sharding starts at first_line.
//
// Sub-sampling (the reference's --data-sub-sample-rate): a negative sample is
// dropped with probability `drop_negatives`, decided by a uniform drawn from
// (seed, global line number), so the same lines go whatever the sharding.
//
// Shuffling: a buffer of S records; once full, each record handed out is a
// uniformly chosen slot, refilled with the next parsed record (then the
// buffer drains in random order). S = 0 keeps file order. Deterministic for
// a given seed.
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sparq/data/criteo.h"
#include "sparq/core/rng.h"

namespace sparq {

struct TsvOptions {
  bool skip_bad_lines = false;        // else the first bad line throws InputError "file:line: why"
  std::size_t shuffle_buffer = 0;     // records; 0 = file order
  std::uint64_t seed = 0;
  int rank = 0, nranks = 1;
  std::size_t shard_block = 1;        // lines per sharding block
  std::size_t chunk_records = 4096;
  std::size_t queue_chunks = 8;
  std::size_t max_records = 0;        // stop after this many records for this rank (0 = all)
  std::size_t first_line = 0, end_line = std::numeric_limits<std::size_t>::max();
  double drop_negatives = 0;          // probability, in [0, 1)
  std::uint64_t sample_seed = 0;      // seeds drop_negatives
};

class TsvStream {
 public:
  // Opens every file up front: a missing or unreadable file is an InputError
  // naming it, before any thread starts.
  TsvStream(std::vector<std::string> files, const TsvOptions& opts);
  ~TsvStream();
  TsvStream(const TsvStream&) = delete;
  TsvStream& operator=(const TsvStream&) = delete;

  // Next record of this rank; false at the end. Rethrows the parser's error.
  bool next(CriteoRecord& rec);

  // Valid once next() has returned false.
  std::size_t bad_lines() const { return bad_lines_; }
  std::size_t lines() const { return lines_; }

 private:
  void parse_main();
  bool pop_chunk();  // false at end of stream

  std::vector<std::string> files_;
  TsvOptions opts_;
  Rng rng_;
  // producer -> consumer
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::vector<CriteoRecord>> queue_;
  bool done_ = false, stop_ = false;
  std::exception_ptr error_;
  std::size_t bad_lines_ = 0, lines_ = 0;  // written by the parser before done_
  // consumer side
  std::vector<CriteoRecord> chunk_;
  std::size_t chunk_pos_ = 0;
  std::vector<CriteoRecord> shuffle_;
  bool source_done_ = false;
  std::size_t emitted_ = 0;
  std::thread thread_;
};

// Reads every record of this rank into memory (no shuffle).
std::vector<CriteoRecord> read_criteo_tsv(const std::vector<std::string>& files, const TsvOptions& opts,
                                          std::size_t* bad_lines = nullptr);

}  // namespace sparq
