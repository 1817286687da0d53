#include "sparq/train/verify.h"

#include "sparq/coll/allreduce.h"

namespace sparq {

std::uint64_t hash_bytes(std::span<const std::byte> b, std::uint64_t h) {
  for (std::byte x : b) h = (h ^ static_cast<std::uint64_t>(x)) * 1099511628211ull;  // FNV-1a
  return h;
}

void verify_replicas(Transport& t, std::span<const float> params, std::uint64_t step) {
  const std::uint64_t h = hash_bytes(std::as_bytes(params));
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
