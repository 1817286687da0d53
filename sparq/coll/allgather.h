#pragma once
// Allgather(v): every rank ends with the concatenation of all ranks' blocks,
// block i from rank i. Ring algorithm, pipelined in segments.
#include <span>

#include "sparq/coll/call.h"

namespace sparq {

struct AllgatherOptions {
  int tag = tags::kAllgather;
  Millis timeout{0};
  std::size_t segment_bytes = 1 << 20;
};

// counts[i] = elements rank i contributes; out has sum(counts) elements and
// mine has counts[rank]. In place: `mine` is this rank's block inside `out`.
template <class T>
CollStats allgatherv(Transport& t, std::span<const T> mine, std::span<T> out, std::span<const std::size_t> counts,
                     const AllgatherOptions& opts = {});

// Equal blocks: out has P * mine.size() elements.
template <class T>
CollStats allgather(Transport& t, std::span<const T> mine, std::span<T> out, const AllgatherOptions& opts = {});

}  // namespace sparq
