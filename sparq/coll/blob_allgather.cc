#include "sparq/coll/blob_allgather.h"

#include <cstring>

#include "sparq/coll/patterns.h"

namespace sparq {

namespace {

Blob pack(const std::vector<Blob>& held, std::size_t first, std::size_t count) {
  std::size_t total = 4 + 8 * count;
  for (std::size_t i = 0; i < count; ++i) total += held[first + i].size();
  Blob msg(total);
  const auto n32 = static_cast<std::uint32_t>(count);
  std::memcpy(msg.data(), &n32, 4);
  std::size_t at = 4 + 8 * count;
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t len = held[first + i].size();
    std::memcpy(msg.data() + 4 + 8 * i, &len, 8);
    if (len) std::memcpy(msg.data() + at, held[first + i].data(), len);
    at += len;
  }
  return msg;
}

std::vector<Blob> unpack(const Blob& msg, std::size_t expect_count, int from) {
  SPARQ_CHECK_AS(WireError, msg.size() >= 4, "blob allgather: {}-byte message from rank {}", msg.size(), from);
  std::uint32_t n = 0;
  std::memcpy(&n, msg.data(), 4);
  SPARQ_CHECK_AS(WireError, n == expect_count && msg.size() >= 4 + 8 * static_cast<std::size_t>(n),
                 "blob allgather: rank {} sent {} blobs in {} bytes, expected {}", from, n, msg.size(), expect_count);
  std::vector<Blob> out(n);
  std::size_t at = 4 + 8 * static_cast<std::size_t>(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t len = 0;
    std::memcpy(&len, msg.data() + 4 + 8 * i, 8);
    SPARQ_CHECK_AS(WireError, len <= msg.size() - at, "blob allgather: rank {}'s blob {} overruns its message", from,
                   i);
    out[i].assign(msg.begin() + static_cast<std::ptrdiff_t>(at), msg.begin() + static_cast<std::ptrdiff_t>(at + len));
    at += len;
  }
  SPARQ_CHECK_AS(WireError, at == msg.size(), "blob allgather: {} stray bytes after rank {}'s blobs",
                 msg.size() - at, from);
  return out;
}

}  // namespace

std::vector<Blob> allgather_blobs(Call& c, Blob mine) {
  const int p = c.size(), r = c.rank();
  // held[i] is the blob of rank r + i (mod P), for i < held.size().
  std::vector<Blob> held;
  held.push_back(std::move(mine));
  for (int d = 1; d < p; d *= 2) {
    const std::size_t m = static_cast<std::size_t>(std::min(d, p - d));
    const int to = pattern::mod(r - d, p), from = pattern::mod(r + d, p);
    const Blob out = pack(held, 0, m);
    Request send = c.isend(to, std::span<const std::byte>(out));
    Request recv = c.irecv_message(from);
    c.wait(recv);
    for (Blob& b : unpack(recv.take_message(), m, from)) held.push_back(std::move(b));
    c.wait(send);
    c.count_round();
  }
  std::vector<Blob> by_rank(p);
  for (int i = 0; i < p; ++i) by_rank[pattern::mod(r + i, p)] = std::move(held[i]);
  return by_rank;
}

std::vector<Blob> gather_blobs(Transport& t, Blob mine, int root) {
  if (t.rank() != root) {
    t.send(root, tags::kBlobGather, mine);
    return {};
  }
  std::vector<Blob> all(static_cast<std::size_t>(t.size()));
  for (int r = 0; r < t.size(); ++r)
    all[static_cast<std::size_t>(r)] = r == root ? std::move(mine) : t.recv_message(r, tags::kBlobGather);
  return all;
}

}  // namespace sparq
