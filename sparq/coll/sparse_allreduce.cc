#include "sparq/coll/sparse_allreduce.h"

#include <algorithm>
#include <cmath>

#include "sparq/coll/algorithms.h"
#include "sparq/coll/allgather.h"
#include "sparq/coll/allreduce.h"
#include "sparq/coll/blob_allgather.h"
#include "sparq/coll/sparse_allgather.h"
#include "sparq/coll/patterns.h"
#include "sparq/compress/stream_codec.h"

namespace sparq {

using compress::SparseStream;

std::string_view sparse_algo_name(SparseAlgo a) {
  switch (a) {
    case SparseAlgo::Auto: return "auto";
    case SparseAlgo::SsarRecursiveDouble: return "ssar-recursive-double";
    case SparseAlgo::SsarSplitAllgather: return "ssar-split-allgather";
    case SparseAlgo::DsarSplitAllgather: return "dsar-split-allgather";
    case SparseAlgo::Dense: return "dense";
  }
  return "?";
}

SparseAlgo parse_sparse_algo(std::string_view s) {
  for (SparseAlgo a : {SparseAlgo::Auto, SparseAlgo::SsarRecursiveDouble, SparseAlgo::SsarSplitAllgather,
                       SparseAlgo::DsarSplitAllgather, SparseAlgo::Dense})
    if (s == sparse_algo_name(a)) return a;
  SPARQ_THROW(InputError,
              "unknown sparse allreduce algorithm '{}' (auto, ssar-recursive-double, ssar-split-allgather, "
              "dsar-split-allgather, dense)",
              s);
}

namespace {

int ceil_log2(int p) {
  int l = 0;
  while ((1 << l) < p) ++l;
  return l;
}

using compress::ValueFormat;

// Every rank must end with the same result, representation included (`auto`
// plans from its nnz), so every dense/sparse decision is one that the ranks
// holding the streams concerned take alike: a sum decides from the two
// operands' counts (compress::sum), which both partners of an exchange hold;
// a concatenation from the gathered ranges' counts, which every rank holds;
// and a sender decides alone, from the exact size of the stream in hand, but
// then changes that stream itself (detail::encode_for_wire), so what it keeps
// is what its peers decode.
SparseStream decode_checked(const Blob& b, std::size_t dim, int from) {
  SparseStream s = compress::decode_stream(b);
  SPARQ_CHECK_AS(WireError, s.dim() == dim, "sparse allreduce: rank {} sent a stream of dimension {}, expected {}",
                 from, s.dim(), dim);
  return s;
}

// The entries of s in [lo, lo + len), as a stream of dimension len.
SparseStream extract(const SparseStream& s, std::size_t lo, std::size_t len) {
  if (s.is_dense()) {
    const auto v = s.values().subspan(lo, len);
    return SparseStream::dense(std::vector<float>(v.begin(), v.end()));
  }
  const auto idx = s.indices();
  const auto first = std::lower_bound(idx.begin(), idx.end(), static_cast<std::uint32_t>(lo));
  const auto last = std::lower_bound(first, idx.end(), static_cast<std::uint32_t>(lo + len));
  const auto a = static_cast<std::size_t>(first - idx.begin()), b = static_cast<std::size_t>(last - idx.begin());
  std::vector<std::uint32_t> local(b - a);
  for (std::size_t i = a; i < b; ++i) local[i - a] = idx[i] - static_cast<std::uint32_t>(lo);
  const auto vals = s.values().subspan(a, b - a);
  return SparseStream::sparse(len, std::move(local), std::vector<float>(vals.begin(), vals.end()));
}

SparseStream exchange(Call& c, SparseStream& mine, int peer, std::size_t dim, ValueFormat vf) {
  const Blob out = detail::encode_for_wire(mine, vf);
  Request send = c.isend(peer, std::span<const std::byte>(out));
  Request recv = c.irecv_message(peer);
  c.wait(recv);
  c.wait(send);
  c.count_round();
  return decode_checked(recv.take_message(), dim, peer);
}

// Recursive doubling over sparse streams; a non-power-of-two P is folded as
// in the dense algorithm (pattern::Fold). Each partner computes mine + theirs;
// stream sums are commutative, so all ranks end with identical streams (with
// lossy values, because each side rounds its own partial sum as it sends it).
SparseStream recursive_double(Call& c, const SparseStream& in, ValueFormat vf) {
  const int r = c.rank();
  const std::size_t n = in.dim();
  const pattern::Fold fold(c.size());
  const int nr = fold.new_rank(r);
  SparseStream acc = in;
  if (r < 2 * fold.rem) {
    if (nr < 0) {
      const Blob out = detail::encode_for_wire(acc, vf);
      Request s = c.isend(r + 1, std::span<const std::byte>(out));
      c.wait(s);
    } else {
      Request q = c.irecv_message(r - 1);
      c.wait(q);
      compress::add_into(acc, decode_checked(q.take_message(), n, r - 1), vf);
    }
    c.count_round();
  }
  if (nr >= 0)
    for (int mask = 1; mask < fold.pof2; mask <<= 1) {
      const int peer = fold.real_rank(nr ^ mask);
      compress::round_values(acc, vf);
      const SparseStream theirs = exchange(c, acc, peer, n, vf);  // may densify acc first
      acc = compress::sum(acc, theirs, vf);
    }
  if (r < 2 * fold.rem) {
    if (nr < 0) {
      Request q = c.irecv_message(r + 1);
      c.wait(q);
      acc = decode_checked(q.take_message(), n, r + 1);
    } else {
      compress::round_values(acc, vf);
      const Blob out = detail::encode_for_wire(acc, vf);
      Request s = c.isend(r - 1, std::span<const std::byte>(out));
      c.wait(s);
    }
    c.count_round();
  }
  return acc;
}

// Split phase: range j of my stream goes to rank j; I sum the P pieces of my
// range in rank order. Returns my reduced range (dimension part.len(rank)).
SparseStream split(Call& c, const SparseStream& in, const pattern::Partition& part, ValueFormat vf) {
  const int p = c.size(), r = c.rank();
  std::vector<Blob> out(p);
  std::vector<Request> recvs(p), sends;
  for (int j = 0; j < p; ++j)
    if (j != r) recvs[j] = c.irecv_message(j);
  for (int s = 1; s < p; ++s) {  // staggered destinations: no rank is everyone's first
    const int j = pattern::mod(r + s, p);
    SparseStream piece = extract(in, part.offset(j), part.len(j));
    out[j] = detail::encode_for_wire(piece, vf);
    sends.push_back(c.isend(j, std::span<const std::byte>(out[j])));
  }
  SparseStream acc;
  bool first = true;
  for (int j = 0; j < p; ++j) {
    SparseStream piece = j == r ? extract(in, part.offset(r), part.len(r)) : SparseStream();
    if (j != r) {
      c.wait(recvs[j]);
      piece = decode_checked(recvs[j].take_message(), part.len(r), j);
    }
    if (first) acc = std::move(piece);
    else compress::add_into(acc, piece, vf);
    first = false;
  }
  c.wait_all(sends);
  c.count_round();
  return acc;
}

// Every rank, the owner included, decodes the same gathered ranges.
SparseStream split_allgather_sparse(Call& c, const SparseStream& in, ValueFormat vf) {
  const pattern::Partition part{in.dim(), c.size()};
  return detail::gather_ranges(c, split(c, in, part, vf), in.dim(), vf);
}

SparseStream split_allgather_dense(Call& c, const SparseStream& in, const SparseAllreduceOptions& opts) {
  const int p = c.size(), r = c.rank();
  const std::size_t n = in.dim();
  const pattern::Partition part{n, p};
  SparseStream mine = split(c, in, part, opts.values);
  std::vector<float> own(part.len(r));
  mine.to_dense(own);
  std::vector<float> result(n);
  const std::vector<std::size_t> bounds = algo::partition_bounds(n, p);
  if (!opts.dense_qsgd) {
    std::copy(own.begin(), own.end(), result.begin() + static_cast<std::ptrdiff_t>(part.offset(r)));
    algo::ring_allgather(c, result.data(), std::span<const std::size_t>(bounds), std::size_t{1} << 18);
    return SparseStream::dense(std::move(result));
  }
  // QSGD dense phase: every rank, the owner included, uses the dequantized
  // ranges, so all ranks hold the same result.
  const compress::QsgdOptions& q = *opts.dense_qsgd;
  std::vector<std::size_t> byte_bounds(p + 1, 0);
  for (int j = 0; j < p; ++j) byte_bounds[j + 1] = byte_bounds[j] + compress::qsgd_bytes(part.len(j), q);
  std::vector<std::byte> wire(byte_bounds[p]);
  // Each rank's range gets its own randomness (tensor key mixed with the rank).
  compress::qsgd_quantize(own, q, opts.step, opts.tensor * 1000003 + static_cast<std::uint64_t>(r),
                          std::span<std::byte>(wire).subspan(byte_bounds[r], byte_bounds[r + 1] - byte_bounds[r]));
  algo::ring_allgather(c, wire.data(), std::span<const std::size_t>(byte_bounds), std::size_t{1} << 20);
  for (int j = 0; j < p; ++j)
    compress::qsgd_dequantize(std::span<const std::byte>(wire).subspan(byte_bounds[j], byte_bounds[j + 1] - byte_bounds[j]),
                              q, std::span<float>(result).subspan(part.offset(j), part.len(j)));
  return SparseStream::dense(std::move(result));
}

}  // namespace

SparseCostEstimate estimate_sparse_allreduce(const SparseAllreduceOptions& opts, std::size_t n, int p,
                                             std::size_t k_max) {
  const double alpha = opts.auto_rule.net.alpha_s, beta = opts.auto_rule.net.beta_s_per_b;
  const double nn = static_cast<double>(n), k = static_cast<double>(std::min(k_max, n)), pp = p;
  // Expected entries in the sum of m ranks' streams.
  auto fill = [&](double m) {
    if (opts.auto_rule.result_density) return std::min(nn * *opts.auto_rule.result_density, k * m);
    return nn > 0 ? nn * (1 - std::pow(1 - k / nn, m)) : 0.0;
  };
  // Wire bytes of a stream with u expected entries out of dim, as the
  // encoder writes it: sparse (the shorter index run: fixed width, or the
  // expected delta-varint run for gaps of mean dim / u; a range's indices
  // are local to it, so they can be narrower; values in opts.values), or
  // dense in the same value format where that is smaller, as the code
  // switches (sparse_capacity) and densifies (encode) there.
  auto bytes = [&](double u, double dim) {
    const auto d = static_cast<std::size_t>(dim);
    const auto pairs = std::min(static_cast<std::size_t>(std::ceil(u)), d);
    return static_cast<double>(std::min(compress::sparse_encoded_size(pairs, d, opts.values),
                                        compress::dense_encoded_size(d, opts.values)));
  };
  const pattern::Fold fold(p);
  const bool folded = fold.rem > 0;
  double rd = folded ? 2 * alpha + (bytes(fill(1), nn) + bytes(fill(pp), nn)) * beta : 0;
  // Stage t sends the sum of 2^t group members (each holding two ranks' data when folded).
  for (int t = 0; (1 << t) < fold.pof2; ++t) rd += alpha + bytes(fill((1 << t) * (folded ? 2.0 : 1.0)), nn) * beta;
  // Split: my P-1 pieces leave back to back while theirs arrive (full duplex).
  const double piece = bytes(fill(1) / pp, nn / pp);
  const double split_t = alpha + (pp - 1) * piece * beta;
  const double range = bytes(fill(pp) / pp, nn / pp);
  const double ssar = split_t + ceil_log2(p) * alpha + (pp - 1) * range * beta;
  double word = 4;  // dense phase bytes per value
  if (opts.dense_qsgd)
    word = static_cast<double>(compress::qsgd_bytes(opts.dense_qsgd->bucket, *opts.dense_qsgd)) /
           static_cast<double>(opts.dense_qsgd->bucket);
  const double dsar = split_t + (pp - 1) * (alpha + nn / pp * word * beta);
  const double ring = 2 * (pp - 1) * (alpha + nn / pp * 4 * beta);
  const double rab = 2 * std::log2(fold.pof2) * alpha + 2 * (fold.pof2 - 1.0) / fold.pof2 * 4 * nn * beta +
                     (folded ? 2 * (alpha + 4 * nn * beta) : 0);
  return {rd, ssar, dsar, p == 1 ? 0 : std::min(ring, rab)};
}

SparseAlgo pick_sparse_algo(const SparseCostEstimate& e) {
  const std::pair<double, SparseAlgo> c[] = {{e.recursive_double, SparseAlgo::SsarRecursiveDouble},
                                             {e.split_allgather, SparseAlgo::SsarSplitAllgather},
                                             {e.dsar_split_allgather, SparseAlgo::DsarSplitAllgather}};
  const auto best = *std::min_element(std::begin(c), std::end(c));
  // The model leaves out the sparse algorithms' encode/merge work, so they
  // must beat the dense allreduce clearly (split + allgather of dense ranges
  // moves exactly a dense reduce-scatter + allgather's bytes).
  return e.dense <= 1.01 * best.first ? SparseAlgo::Dense : best.second;
}

namespace {

// Every rank must choose the same algorithm. From a history: the previous
// result's density u (alike on every rank) stands for the fill-in, and the
// local nnz k that gives it for P random index sets, u = 1 - (1 - k/N)^P.
// Otherwise the ranks agree on the largest nnz first.
SparseAlgo plan_auto(Transport& t, const SparseStream& in, const SparseAllreduceOptions& opts) {
  const std::size_t n = in.dim();
  const SparseAutoHistory* h = opts.history;
  if (h && h->dim == n && h->nranks == t.size() && h->result_nnz > 0 && n > 0) {
    const double u = static_cast<double>(h->result_nnz) / static_cast<double>(n);
    SparseAllreduceOptions o = opts;
    if (!o.auto_rule.result_density) o.auto_rule.result_density = u;
    const double k = static_cast<double>(n) * (1 - std::pow(1 - u, 1.0 / t.size()));
    return pick_sparse_algo(estimate_sparse_allreduce(o, n, t.size(), static_cast<std::size_t>(std::ceil(k))));
  }
  std::int64_t k = static_cast<std::int64_t>(in.nnz());
  AllreduceOptions mx;
  mx.op = ReduceOp::Max;
  mx.algo = AllreduceAlgo::RecursiveDoubling;
  mx.timeout = opts.timeout;
  allreduce(t, std::span<std::int64_t>(&k, 1), mx);
  return pick_sparse_algo(estimate_sparse_allreduce(opts, n, t.size(), static_cast<std::size_t>(k)));
}

}  // namespace

CollStats sparse_allreduce(Transport& t, const SparseStream& in, SparseStream& out, const SparseAllreduceOptions& opts) {
  // Created first so that its counters include auto's nnz agreement.
  Call c(t, "sparse_allreduce", opts.tag, opts.timeout);
  SparseAlgo algo = opts.algo;
  if (algo == SparseAlgo::Auto) algo = plan_auto(t, in, opts);
  const std::string name(sparse_algo_name(algo));
  switch (algo) {
    case SparseAlgo::SsarRecursiveDouble: out = recursive_double(c, in, opts.values); break;
    case SparseAlgo::SsarSplitAllgather: out = split_allgather_sparse(c, in, opts.values); break;
    case SparseAlgo::DsarSplitAllgather: out = split_allgather_dense(c, in, opts); break;
    case SparseAlgo::Dense: {
      std::vector<float> v(in.dim());
      in.to_dense(v);
      AllreduceOptions o;
      o.timeout = opts.timeout;
      allreduce(t, std::span<float>(v), o);
      out = SparseStream::dense(std::move(v));
      break;
    }
    case SparseAlgo::Auto: break;
  }
  compress::round_values(out, opts.values);  // one precision for every algorithm's result
  if (opts.history) *opts.history = {in.dim(), t.size(), out.is_dense() ? 0 : out.nnz()};
  return c.finish(name);
}

}  // namespace sparq
