#include "sparq/train/verify.h"

#include <cstring>

#include "sparq/coll/allreduce.h"

namespace sparq {

std::uint64_t hash_bytes(std::span<const std::byte> b, std::uint64_t h) {
  // FNV-1a over 8-byte words in four interleaved lanes (one lane's chain of
  // multiplies ran at a quarter of memory speed: every replicated rank
  // hashes its tables at the end of a run), then the tail bytes.
  constexpr std::uint64_t kPrime = 1099511628211ull;
  std::uint64_t lane[4] = {h, h ^ 1, h ^ 2, h ^ 3};
  std::size_t i = 0;
  for (; i + 32 <= b.size(); i += 32)
    for (int l = 0; l < 4; ++l) {
      std::uint64_t w;
      std::memcpy(&w, b.data() + i + 8 * l, 8);
      lane[l] = (lane[l] ^ w) * kPrime;
    }
  for (const std::uint64_t x : lane) h = (h ^ x) * kPrime;
  for (; i < b.size(); ++i) h = (h ^ static_cast<std::uint64_t>(b[i])) * kPrime;
  return h;
}

void verify_replicas(Transport& t, std::span<const float> params, std::uint64_t step) {
  verify_replica_hash(t, hash_bytes(std::as_bytes(params)), step);
}

void verify_replica_hash(Transport& t, std::uint64_t h, std::uint64_t step) {
  // int64 min and max of the hash: equal on all ranks iff every hash is equal.
  std::int64_t lo = static_cast<std::int64_t>(h), hi = lo;
  AllreduceOptions o;
  o.algo = AllreduceAlgo::RecursiveDoubling;
  o.op = ReduceOp::Min;
  allreduce(t, std::span<std::int64_t>(&lo, 1), o);
  o.op = ReduceOp::Max;
  allreduce(t, std::span<std::int64_t>(&hi, 1), o);
  SPARQ_CHECK(lo == hi, "replicas diverged at step {}: rank {} holds parameter hash {:016x}, ranks range over "
              "[{:016x}, {:016x}]", step, t.rank(), h, static_cast<std::uint64_t>(lo), static_cast<std::uint64_t>(hi));
}

}  // namespace sparq
