#pragma once
// Sparse allgather of disjoint slices (SparCML, Renggli et al., SC'19,
// sections 5 and 8.2: MPI-OPT's coordinate descent, where each node's new
// coordinate values lie in its own slice of the model). The dimension N is
// split into P contiguous ranges as pattern::Partition splits it (rank r owns
// [offset(r), offset(r) + len(r))); rank r contributes a SparseStream of its
// range's length (indices relative to its range's start), and every rank
// ends with the N-dimensional union, identical on every rank.
//
// Algorithm: each rank encodes its stream in the sparse stream wire format
// (compress/stream_codec.h: fixed-width or delta-varint indices, the range's
// length as dimension), then Bruck's allgather of blobs whose sizes no rank
// knows (blob_allgather.h), ceil(log2 P) rounds; every blob crosses the
// network P-1 times. A received stream whose dimension is not its sender's
// range length is a WireError (so no index can land outside its range). The
// result goes dense where the union exceeds sparse_capacity(N) pairs or a
// rank sent its range dense (it was smaller so).
//
// The dense counterpart is allgatherv (allgather.h) of the same ranges.
#include <cstddef>
#include <vector>

#include "sparq/coll/call.h"
#include "sparq/compress/sparse_stream.h"

namespace sparq {

struct SparseAllgatherOptions {
  int tag = tags::kSparseAllgather;
  Millis timeout{0};
  compress::ValueFormat values = compress::ValueFormat::F32;
};

// mine.dim() must be rank r's range length of `dim` (else InputError).
CollStats sparse_allgather(Transport& t, const compress::SparseStream& mine, std::size_t dim,
                           compress::SparseStream& out, const SparseAllgatherOptions& opts = {});

namespace detail {
// s's wire encoding; densifies s first where dense encodes smaller, so a
// sender keeps the representation its peers decode.
std::vector<std::byte> encode_for_wire(compress::SparseStream& s, compress::ValueFormat vf);
// The algorithm inside a running collective (SSAR_Split_allgather's second
// phase is this allgather of the reduced ranges).
compress::SparseStream gather_ranges(Call& c, compress::SparseStream mine, std::size_t dim,
                                     compress::ValueFormat vf);
}  // namespace detail

}  // namespace sparq
