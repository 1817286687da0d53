#include "sparq/data/tsv_stream.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "sparq/core/error.h"
#include "sparq/data/text_file.h"

namespace sparq {

TsvStream::TsvStream(std::vector<std::string> files, const TsvOptions& opts)
    : files_(std::move(files)), opts_(opts), rng_(opts.seed, 0x75f) {
  SPARQ_CHECK_AS(InputError, opts_.nranks >= 1 && opts_.rank >= 0 && opts_.rank < opts_.nranks,
                 "rank {} of {} is not a valid shard", opts_.rank, opts_.nranks);
  SPARQ_CHECK_AS(InputError, opts_.shard_block >= 1 && opts_.chunk_records >= 1 && opts_.queue_chunks >= 1,
                 "shard block, chunk and queue sizes must be positive");
  SPARQ_CHECK_AS(InputError, opts_.first_line <= opts_.end_line, "line range [{}, {}) is empty", opts_.first_line,
                 opts_.end_line);
  SPARQ_CHECK_AS(InputError, opts_.drop_negatives >= 0 && opts_.drop_negatives < 1,
                 "the sub-sample rate of negatives must be in [0, 1), got {}", opts_.drop_negatives);
  for (const auto& f : files_) TextFile{f};  // fail early, in the caller's thread
  shuffle_.reserve(opts_.shuffle_buffer);
  thread_ = std::thread([this] { parse_main(); });
}

TsvStream::~TsvStream() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void TsvStream::parse_main() {
  std::size_t line_no_global = 0, bad = 0, kept = 0;
  std::vector<CriteoRecord> out;
  out.reserve(opts_.chunk_records);
  auto push = [&](bool final) {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return stop_ || queue_.size() < opts_.queue_chunks; });
    if (stop_) return false;
    if (!out.empty()) queue_.push_back(std::move(out));
    out = {};
    out.reserve(opts_.chunk_records);
    if (final) {
      bad_lines_ = bad;
      lines_ = line_no_global;
      done_ = true;
    }
    lk.unlock();
    cv_.notify_all();
    return true;
  };
  try {
    const std::size_t P = static_cast<std::size_t>(opts_.nranks), r = static_cast<std::size_t>(opts_.rank);
    std::string why;
    for (const auto& path : files_) {
      if (line_no_global >= opts_.end_line) break;
      TextFile f(path);
      std::size_t line_in_file = 0;
      auto handle = [&](std::string_view line) -> bool {  // false: stop everything
        ++line_in_file;
        const std::size_t g = line_no_global++;
        if (g < opts_.first_line) return true;
        if (g >= opts_.end_line) return false;
        if (((g - opts_.first_line) / opts_.shard_block) % P != r) return true;
        if (line.empty() || (line.size() == 1 && line[0] == '\r')) {  // a blank line is malformed too
          why = "empty line";
        } else {
          CriteoRecord rec;
          if (parse_criteo_line(line, rec, why)) {
            if (rec.label == 0 && opts_.drop_negatives > 0 && Rng(opts_.sample_seed, g).uniform() < opts_.drop_negatives)
              return true;
            out.push_back(rec);
            ++kept;
            if (out.size() == opts_.chunk_records && !push(false)) return false;
            return !(opts_.max_records && kept >= opts_.max_records);
          }
        }
        if (!opts_.skip_bad_lines) SPARQ_THROW(InputError, "{}:{}: malformed line: {}", path, line_in_file, why);
        ++bad;
        return true;
      };
      if (!for_each_line(f, handle)) break;
    }
    push(true);
  } catch (...) {
    std::lock_guard lk(mu_);
    error_ = std::current_exception();
    done_ = true;
    cv_.notify_all();
  }
}

bool TsvStream::pop_chunk() {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return !queue_.empty() || done_; });
  if (!queue_.empty()) {
    chunk_ = std::move(queue_.front());
    queue_.pop_front();
    chunk_pos_ = 0;
    lk.unlock();
    cv_.notify_all();
    return true;
  }
  if (error_) std::rethrow_exception(error_);
  return false;
}

bool TsvStream::next(CriteoRecord& rec) {
  auto next_parsed = [&](CriteoRecord& r) {
    if (chunk_pos_ == chunk_.size()) {
      if (source_done_ || !pop_chunk()) {
        source_done_ = true;
        return false;
      }
    }
    r = chunk_[chunk_pos_++];
    return true;
  };
  if (opts_.shuffle_buffer == 0) return next_parsed(rec);
  while (!source_done_ && shuffle_.size() < opts_.shuffle_buffer) {
    CriteoRecord r;
    if (!next_parsed(r)) break;
    shuffle_.push_back(r);
  }
  if (shuffle_.empty()) return false;
  const std::size_t k = rng_.below(shuffle_.size());
  rec = shuffle_[k];
  CriteoRecord r;
  if (!source_done_ && next_parsed(r)) {
    shuffle_[k] = r;
  } else {
    shuffle_[k] = shuffle_.back();
    shuffle_.pop_back();
  }
  ++emitted_;
  return true;
}

std::vector<CriteoRecord> read_criteo_tsv(const std::vector<std::string>& files, const TsvOptions& opts,
                                          std::size_t* bad_lines) {
  TsvOptions o = opts;
  o.shuffle_buffer = 0;
  TsvStream s(files, o);
  std::vector<CriteoRecord> out;
  CriteoRecord r;
  while (s.next(r)) out.push_back(r);
  if (bad_lines) *bad_lines = s.bad_lines();
  return out;
}

}  // namespace sparq
