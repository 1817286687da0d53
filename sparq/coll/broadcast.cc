#include "sparq/coll/broadcast.h"

#include "sparq/coll/patterns.h"

namespace sparq {

CollStats broadcast(Transport& t, MutBytes buf, int root, const BroadcastOptions& opts) {
  const int p = t.size();
  SPARQ_CHECK_AS(InputError, root >= 0 && root < p, "broadcast: root {} out of range [0, {})", root, p);
  Call c(t, "broadcast/binomial", opts.tag, opts.timeout);
  const int v = pattern::mod(t.rank() - root, p);  // rank relative to the root
  int mask = 1;
  for (; mask < p; mask <<= 1) {
    if (v & mask) {
      Request q = c.irecv(pattern::mod(v - mask + root, p), buf);
      c.wait(q);
      c.count_round();
      break;
    }
  }
  std::vector<Request> sends;
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (v + mask < p) sends.push_back(c.isend(pattern::mod(v + mask + root, p), std::span<const std::byte>(buf)));
  c.wait_all(sends);
  return c.finish("binomial");
}

CollStats barrier(Transport& t, const BarrierOptions& opts) {
  const int p = t.size(), r = t.rank();
  Call c(t, "barrier/dissemination", opts.tag, opts.timeout);
  for (int k = 1; k < p; k <<= 1)
    c.sendrecv(pattern::mod(r + k, p), std::span<const std::byte>(), pattern::mod(r - k, p), std::span<std::byte>());
  return c.finish("dissemination");
}

}  // namespace sparq
