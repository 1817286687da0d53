#pragma once
// Replica check for data parallelism (`--verify-freq`): every rank must hold
// bit-identical parameters after every step. A 64-bit hash of the bytes is
// compared through a min/max allreduce; any difference is an error naming the
// step, never a warning.
#include <cstdint>
#include <span>

#include "sparq/transport/transport.h"

namespace sparq {

std::uint64_t hash_bytes(std::span<const std::byte> b, std::uint64_t h = 1469598103934665603ull);

// Throws sparq::Error when the ranks' hashes of `params` differ.
void verify_replicas(Transport& t, std::span<const float> params, std::uint64_t step);
// Same, for a hash the caller computed (over several buffers).
void verify_replica_hash(Transport& t, std::uint64_t hash, std::uint64_t step);

}  // namespace sparq
