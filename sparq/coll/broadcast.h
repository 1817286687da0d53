#pragma once
// Broadcast (binomial tree: ceil(log2 P) rounds, the root's message crosses
// the network P-1 times in total) and barrier (dissemination: ceil(log2 P)
// rounds of empty messages).
#include <span>

#include "sparq/coll/call.h"

namespace sparq {

struct BroadcastOptions {
  int tag = tags::kBroadcast;
  Millis timeout{0};
};

// On return every rank's `buf` holds the root's. Sizes must agree (a
// mismatch is a WireError on the receiving rank).
CollStats broadcast(Transport& t, MutBytes buf, int root, const BroadcastOptions& opts = {});

template <class T>
CollStats broadcast(Transport& t, std::span<T> buf, int root, const BroadcastOptions& opts = {}) {
  return broadcast(t, std::as_writable_bytes(buf), root, opts);
}

struct BarrierOptions {
  int tag = tags::kBarrier;
  Millis timeout{0};
};

// Returns on each rank only after every rank has entered.
CollStats barrier(Transport& t, const BarrierOptions& opts = {});

}  // namespace sparq
