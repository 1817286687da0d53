#pragma once
// Strict reader of libsvm/svmlight files (plain or gzip), the input of the
// linear models (LIBLINEAR's data sets: rcv1, news20, url, kdd2010, ...):
//
//   <label> <index>:<value> <index>:<value> ... [# comment]
//
// one sample per line; blanks are spaces and tabs; a '\r' before the '\n' is
// tolerated. Labels are +1/1, -1 or 0 (0 is the negative class of the 0/1
// convention and is stored as -1; "1.0", "+1", "-1.0" are accepted). Indices
// are 1-based, strictly increasing; values finite floats (zeros are kept, as
// LIBLINEAR keeps them). Anything else is an InputError "path:line: reason"
// (line numbers of the whole file, 1-based), or, with skip_bad_lines, a
// counted and dropped line. An empty, blank or comment-only line has no label
// and is an error ("empty line"); a file with labels 0 and -1 mixes the two
// conventions and is an error at the later one.
//
// Sharding (rank s of S reads only its part of one file): shard s owns the
// lines whose first byte lies in [size*s/S, size*(s+1)/S) of the file's
// (uncompressed) text. A plain file is read from there with a seek, so a rank
// reads its range plus the tail of its last line. A gzip file (told by its
// magic bytes, not its name) cannot seek and does not state its text's size:
// with S > 1 each rank inflates the whole file once to learn the size, then
// again up to the end of its range, throwing away what lies before it (up to
// 2x the full decompression per rank; S = 1 inflates once). The shards' rows,
// concatenated in shard order, equal the rows of S = 1.
//
// Speed: blocks of 16 MiB, no allocation per line, std::from_chars for every
// number; the line number of an error is counted only when one is reported.
// Memory: the rows (8 bytes per entry, 12 per row) plus one block.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "sparq/data/sparse_rows.h"

namespace sparq {

struct LibsvmOptions {
  // 0: none given; rows.num_features becomes the largest index seen in this
  // shard (1-based max; 0 with no entries): a caller reading shards takes the
  // maximum over them. Given: an index above it is an error (or dropped).
  std::size_t num_features = 0;
  bool skip_bad_lines = false;  // count and skip a bad line instead of throwing
  // With num_features: an index above it is dropped and counted instead of an
  // error (test data read against a trained model).
  bool drop_beyond = false;
  int shard = 0, shards = 1;  // read only shard `shard` of `shards` (see above)
};

struct LibsvmRead {
  SparseRows rows;
  std::size_t lines = 0;      // lines of this shard (bad ones included)
  std::size_t bad_lines = 0;  // skipped bad lines (skip_bad_lines)
  std::string first_bad;      // "path:line: reason" of the first skipped line, empty if none
  std::size_t dropped = 0;    // feature entries dropped (drop_beyond), in good lines only
  // Bit 0: a label 0 was seen, bit 1: a label -1 was seen. A caller reading
  // shards ORs this over them: both bits set mixes the conventions (an error).
  unsigned label_kinds = 0;
};

// Reads this shard of the file. InputError for a missing/unreadable file, a
// corrupt gzip stream, bad options, or (without skip_bad_lines) a bad line.
LibsvmRead read_libsvm(const std::string& path, const LibsvmOptions& opts);

// Appends one line (with its '\n') for the row: label as +1 (label > 0) or -1,
// indices 1-based, values as the shortest text that reads back to the same
// float. read_libsvm reads it back exactly.
void format_libsvm_row(float label, std::span<const std::uint32_t> idx, std::span<const float> val,
                       std::string& out);

}  // namespace sparq
