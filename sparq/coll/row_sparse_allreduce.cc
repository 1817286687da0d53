#include "sparq/coll/row_sparse_allreduce.h"

#include <cstring>

#include "sparq/coll/patterns.h"
#include "sparq/compress/stream_codec.h"
#include "sparq/core/error.h"
#include "sparq/core/kernel_costs.h"

namespace sparq {

namespace {

constexpr std::size_t kHeader = sizeof(std::uint64_t);

// m's message. In bf16, m's values become the ones sent (rounded).
std::vector<std::byte> encode(RowSparse& m, compress::ValueFormat v) {
  const std::uint64_t n = m.rows.size();
  const ChargedKernel charged("row_sparse_encode_per_value", Units{m.values.size()}, static_cast<std::size_t>(v));
  std::vector<std::byte> b(kHeader + n * sizeof(std::uint32_t) + compress::values_bytes(m.values.size(), v));
  std::memcpy(b.data(), &n, kHeader);
  if (n == 0) return b;  // (memcpy from an empty vector's null data() is undefined)
  std::memcpy(b.data() + kHeader, m.rows.data(), n * sizeof(std::uint32_t));
  compress::round_values(m.values, v);
  compress::store_values(m.values, v, 0, b.data() + kHeader + n * sizeof(std::uint32_t));
  return b;
}

RowSparse decode(const std::vector<std::byte>& b, std::size_t rows, std::size_t dim, compress::ValueFormat v, int from) {
  SPARQ_CHECK_AS(WireError, b.size() >= kHeader, "row-sparse allreduce: rank {} sent {} bytes, less than a header",
                 from, b.size());
  std::uint64_t n = 0;
  std::memcpy(&n, b.data(), kHeader);
  // n <= rows first, so the size below cannot overflow.
  SPARQ_CHECK_AS(WireError,
                 n <= rows && b.size() == kHeader + n * sizeof(std::uint32_t) + compress::values_bytes(n * dim, v),
                 "row-sparse allreduce: rank {} sent {} bytes for {} rows of {} {} (a matrix of {} rows)", from,
                 b.size(), n, dim, compress::value_format_name(v), rows);
  const ChargedKernel charged("row_sparse_decode_per_value", Units{n * dim}, static_cast<std::size_t>(v));
  RowSparse m;
  if (n == 0) return m;
  m.rows.resize(n);
  m.values.resize(n * dim);
  std::memcpy(m.rows.data(), b.data() + kHeader, n * sizeof(std::uint32_t));
  compress::load_values(b.data() + kHeader + n * sizeof(std::uint32_t), v, 0, m.values);
  for (std::size_t i = 0; i < n; ++i)
    SPARQ_CHECK_AS(WireError, m.rows[i] < rows && (i == 0 || m.rows[i - 1] < m.rows[i]),
                   "row-sparse allreduce: rank {} sent row {} at position {} (rows must ascend, below {})", from,
                   m.rows[i], i, rows);
  return m;
}

// a + b, row by row (a row in both: a's values + b's, the same bits in either order).
RowSparse add(const RowSparse& a, const RowSparse& b, std::size_t dim) {
  const ChargedKernel charged("row_sparse_add_per_value", Units{a.values.size() + b.values.size()}, dim);
  RowSparse s;
  s.rows.reserve(a.rows.size() + b.rows.size());
  s.values.reserve((a.rows.size() + b.rows.size()) * dim);
  std::size_t i = 0, j = 0;
  auto take = [&](const RowSparse& m, std::size_t k) {
    s.rows.push_back(m.rows[k]);
    s.values.insert(s.values.end(), m.values.begin() + static_cast<std::ptrdiff_t>(k * dim),
                    m.values.begin() + static_cast<std::ptrdiff_t>((k + 1) * dim));
  };
  while (i < a.rows.size() && j < b.rows.size()) {
    if (a.rows[i] < b.rows[j]) {
      take(a, i++);
    } else if (b.rows[j] < a.rows[i]) {
      take(b, j++);
    } else {
      s.rows.push_back(a.rows[i]);
      const std::size_t off = s.values.size();
      s.values.resize(off + dim);
      const float* x = a.values.data() + i * dim;
      const float* y = b.values.data() + j * dim;
      for (std::size_t d = 0; d < dim; ++d) s.values[off + d] = x[d] + y[d];
      ++i, ++j;
    }
  }
  for (; i < a.rows.size(); ++i) take(a, i);
  for (; j < b.rows.size(); ++j) take(b, j);
  return s;
}

void send(Call& c, int peer, RowSparse& m, compress::ValueFormat v) {
  const std::vector<std::byte> out = encode(m, v);
  Request s = c.isend(peer, std::span<const std::byte>(out));
  c.wait(s);
}

RowSparse receive(Call& c, int peer, std::size_t rows, std::size_t dim, compress::ValueFormat v) {
  Request q = c.irecv_message(peer);
  c.wait(q);
  return decode(q.take_message(), rows, dim, v, peer);
}

}  // namespace

CollStats row_sparse_allreduce(Transport& t, RowSparse& io, std::size_t rows, std::size_t dim, compress::ValueFormat v,
                               int tag, Millis timeout) {
  SPARQ_CHECK_AS(InputError, dim > 0 && rows <= (std::size_t{1} << 32),
                 "row-sparse allreduce of {} rows x {}: needs dim > 0 and at most 2^32 rows", rows, dim);
  SPARQ_CHECK_AS(InputError, v == compress::ValueFormat::F32 || v == compress::ValueFormat::Bf16,
                 "row-sparse allreduce: values f32 or bf16, not {}", compress::value_format_name(v));
  SPARQ_CHECK_AS(InputError, io.values.size() == io.rows.size() * dim,
                 "row-sparse allreduce: {} values for {} rows of {}", io.values.size(), io.rows.size(), dim);
  for (std::size_t i = 0; i < io.rows.size(); ++i)
    SPARQ_CHECK_AS(InputError, io.rows[i] < rows && (i == 0 || io.rows[i - 1] < io.rows[i]),
                   "row-sparse allreduce: row {} at position {} (rows must ascend, below {})", io.rows[i], i, rows);
  Call c(t, "row-sparse allreduce", tag, timeout);
  const int r = c.rank();
  const pattern::Fold fold(c.size());
  const int nr = fold.new_rank(r);
  if (r < 2 * fold.rem) {  // fold: an even rank of the first 2 rem hands its matrix to the odd one
    if (nr < 0) send(c, r + 1, io, v);
    else io = add(io, receive(c, r - 1, rows, dim, v), dim);
    c.count_round();
  }
  if (nr >= 0)
    for (int mask = 1; mask < fold.pof2; mask <<= 1) {
      const int peer = fold.real_rank(nr ^ mask);
      const std::vector<std::byte> out = encode(io, v);
      Request s = c.isend(peer, std::span<const std::byte>(out));
      Request q = c.irecv_message(peer);
      c.wait(q);
      c.wait(s);
      c.count_round();
      io = add(io, decode(q.take_message(), rows, dim, v, peer), dim);
    }
  if (r < 2 * fold.rem) {  // and gets the sum back, in f32: the same bits as the ranks that kept theirs
    if (nr < 0) io = receive(c, r + 1, rows, dim, compress::ValueFormat::F32);
    else send(c, r - 1, io, compress::ValueFormat::F32);
    c.count_round();
  }
  return c.finish("row-sparse-recursive-double");
}

}  // namespace sparq
