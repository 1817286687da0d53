#pragma once
// The request state of a transport decorator (SimTransport, GroupTransport):
// the inner transport's request, forwarded, so the inner transport counts and
// matches the traffic as its own. A decorator that must act on completion
// (move a clock, unpack a header) overrides apply(), which runs exactly once,
// when the caller first sees the request complete.
#include "sparq/transport/transport.h"

namespace sparq {

struct ForwardedState : RequestState {
  Request inner;
  bool applied = false;

  virtual void apply() {}
  void apply_once() {
    if (applied) return;
    applied = true;  // even if apply() throws: a bad message is not read twice
    apply();
  }
  bool test() override {
    if (!inner.test()) return false;
    apply_once();
    return true;
  }
  bool wait_until(Clock::time_point deadline) override {
    if (!inner.wait_until(deadline)) return false;
    apply_once();
    return true;
  }
  std::size_t bytes() const override { return inner.bytes(); }
  std::vector<std::byte> take_message() override { return inner.take_message(); }
};

}  // namespace sparq
