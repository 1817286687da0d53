#pragma once
// Records in memory and the batches of an epoch.
//
// RecordSet holds the samples either in memory of its own (parsed TSV,
// generated data: on huge pages, since a shuffled epoch reads them at
// random, huge_pages.h) or as a memory-mapped binary file, behind one span.
// BatchPlan decides which records form batch i of an epoch on rank r of P;
// make_batch() turns records into the model's Batch (ids hashed to each
// table's size, hash.h).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sparq/core/huge_pages.h"
#include "sparq/data/batch.h"
#include "sparq/data/binary_format.h"
#include "sparq/data/criteo.h"
#include "sparq/data/tsv_stream.h"

namespace sparq {

class RecordSet {
 public:
  RecordSet() = default;
  // Copies `v` (then freed) onto huge pages.
  explicit RecordSet(std::vector<CriteoRecord> v);
  explicit RecordSet(MappedRecords m) : mapped_(std::make_unique<MappedRecords>(std::move(m))) {}
  std::span<const CriteoRecord> records() const {
    return mapped_ ? mapped_->records() : std::span<const CriteoRecord>(owned_.get(), owned_size_);
  }
  std::size_t size() const { return records().size(); }

  // A binary file (by its magic) is mapped; a zip is read as the DLRM
  // reference's .npz (criteo_npz.h, all of it); anything else is read as TSV
  // with `tsv` (sharding there applies to lines; pass rank 0 of 1 to load
  // everything). `bad_lines` receives the skipped count.
  static RecordSet load(const std::string& path, const TsvOptions& tsv = {}, std::size_t* bad_lines = nullptr);

 private:
  RandomAccessArray<CriteoRecord> owned_;
  std::size_t owned_size_ = 0;
  std::unique_ptr<MappedRecords> mapped_;  // a pointer keeps RecordSet movable
};

// Builds a one-hot Batch from `count` records: recs[order[first + k]] for
// k < count, or recs[first + k] when order is empty. With `part`, only that
// part is written; the rest of `out` keeps what it held.
void make_batch(std::span<const CriteoRecord> recs, std::span<const std::uint32_t> order, std::size_t first,
                std::size_t count, std::span<const std::size_t> table_rows, Batch& out,
                const BatchPart* part = nullptr);

struct BatchPlanOptions {
  std::size_t batch = 128;
  bool shuffle = true;     // a fresh seeded permutation each epoch (Rng(seed, epoch))
  bool drop_last = false;  // drop a final partial batch
  std::uint64_t seed = 0;
  int rank = 0, nranks = 1;  // rank r takes the epoch's batches r, r+P, ...
};

class BatchPlan {
 public:
  BatchPlan(std::size_t num_records, const BatchPlanOptions& opts);
  void start_epoch(std::size_t epoch);
  std::size_t num_batches() const;  // this rank's batches per epoch
  std::size_t batch_size(std::size_t i) const;  // samples in this rank's batch i
  // This rank's batch i of the current epoch (only `part` of it, if given).
  void fill(std::size_t i, std::span<const CriteoRecord> recs, std::span<const std::size_t> table_rows,
            Batch& out, const BatchPart* part = nullptr) const;

 private:
  std::size_t first(std::size_t i) const;  // the epoch position of batch i's first record
  std::size_t n_;
  BatchPlanOptions o_;
  std::vector<std::uint32_t> order_;
};

}  // namespace sparq
