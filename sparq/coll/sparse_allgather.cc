#include "sparq/coll/sparse_allgather.h"

#include "sparq/coll/blob_allgather.h"
#include "sparq/coll/patterns.h"
#include "sparq/compress/stream_codec.h"

namespace sparq {

using compress::SparseStream;
using compress::ValueFormat;

namespace {

// Joins range j (dimension part.len(j)) of every rank into one stream of
// dimension N: sparse while the total fits sparse_capacity(N, vf). Every rank
// holds the same counts, so every rank takes the same decision.
SparseStream concat(std::size_t n, const pattern::Partition& part, const std::vector<SparseStream>& ranges,
                    ValueFormat vf) {
  std::size_t nnz = 0;
  bool any_dense = false;
  for (const auto& r : ranges) {
    nnz += r.nnz();
    any_dense |= r.is_dense();
  }
  if (any_dense || nnz > compress::sparse_capacity(n, vf)) {
    std::vector<float> dense(n);
    for (int j = 0; j < part.parts; ++j)
      ranges[j].to_dense(std::span<float>(dense).subspan(part.offset(j), part.len(j)));
    return SparseStream::dense(std::move(dense));
  }
  SparseStream out;
  const auto pairs = out.start_pairs(n, nnz);
  std::size_t at = 0;
  for (int j = 0; j < part.parts; ++j) {  // ranges in rank order: the indices stay increasing
    const auto off = static_cast<std::uint32_t>(part.offset(j));
    const auto idx = ranges[j].indices();
    const auto val = ranges[j].values();
    for (std::size_t i = 0; i < idx.size(); ++i, ++at) {
      pairs.indices[at] = idx[i] + off;
      pairs.values[at] = val[i];
    }
  }
  out.finish_pairs(nnz);
  return out;
}

}  // namespace

namespace detail {

std::vector<std::byte> encode_for_wire(SparseStream& s, ValueFormat vf) {
  compress::densify_if_smaller(s, vf);
  std::vector<std::byte> b(compress::encoded_size(s, vf));
  compress::encode_stream(s, b, vf);
  return b;
}

SparseStream gather_ranges(Call& c, SparseStream mine, std::size_t dim, ValueFormat vf) {
  const pattern::Partition part{dim, c.size()};
  std::vector<Blob> blobs = allgather_blobs(c, encode_for_wire(mine, vf));
  std::vector<SparseStream> ranges(c.size());
  for (int j = 0; j < c.size(); ++j) {
    ranges[j] = compress::decode_stream(blobs[j]);
    SPARQ_CHECK_AS(WireError, ranges[j].dim() == part.len(j),
                   "sparse allgather: rank {} sent a range of dimension {}, its range has {}", j, ranges[j].dim(),
                   part.len(j));
  }
  return concat(dim, part, ranges, vf);
}

}  // namespace detail

CollStats sparse_allgather(Transport& t, const SparseStream& mine, std::size_t dim, SparseStream& out,
                           const SparseAllgatherOptions& opts) {
  const pattern::Partition part{dim, t.size()};
  SPARQ_CHECK_AS(InputError, mine.dim() == part.len(t.rank()),
                 "sparse allgather: rank {} gives a stream of dimension {}, its range of {} has {}", t.rank(),
                 mine.dim(), dim, part.len(t.rank()));
  SPARQ_CHECK_AS(InputError, dim < (std::size_t{1} << 32), "sparse allgather: dimension {} needs 32-bit indices", dim);
  Call c(t, "sparse allgather", opts.tag, opts.timeout);
  out = detail::gather_ranges(c, mine, dim, opts.values);
  return c.finish("sparse-allgather");
}

}  // namespace sparq
