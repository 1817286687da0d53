#pragma once
// Allgather of byte blobs whose sizes no rank knows in advance (SparCML's
// "no global knowledge"): every rank ends with every rank's blob.
//
// Bruck's algorithm, any P, ceil(log2 P) rounds: in round k (distance
// d = 2^k) a rank sends the blobs it holds for ranks r, r+1, ..., r+m-1
// (m = min(d, P-d)) to rank r-d and receives those of ranks r+d, ...,
// r+d+m-1 from rank r+d. Each blob crosses the network P-1 times in total,
// as in a ring, but in log2 P rounds instead of P-1.
//
// Message layout: [u32 count][u64 size x count][blobs back to back]. A
// message that does not parse exactly is a WireError.
#include <cstddef>
#include <vector>

#include "sparq/coll/call.h"

namespace sparq {

using Blob = std::vector<std::byte>;

// Returns the P blobs in rank order (mine included, moved in).
std::vector<Blob> allgather_blobs(Call& c, Blob mine);

// Every rank's blob to `root` only (checkpoints: each rank's codec state),
// one message per rank: root gets the P blobs in rank order, the others an
// empty vector.
std::vector<Blob> gather_blobs(Transport& t, Blob mine, int root);

}  // namespace sparq
