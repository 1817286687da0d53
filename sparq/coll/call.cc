#include "sparq/coll/call.h"

namespace sparq {

Call::Call(Transport& t, std::string name, int tag, Millis timeout)
    : t_(t), name_(std::move(name)), tag_(tag), timeout_(timeout.count() > 0 ? timeout : t.timeout()),
      rank_(t.rank()), size_(t.size()), before_(t.counters()), sim_start_(t.virtual_time()) {}

void Call::wait(Request& r) {
  try {
    r.wait(timeout_);
  } catch (...) {
    rethrow_with_prefix(name_);
  }
}

void Call::wait_all(std::span<Request> rs) {
  for (Request& r : rs)
    if (r.active()) wait(r);
}

CollStats Call::finish(std::string algo) const {
  CollStats s{std::move(algo), (t_.counters() - before_).total(), rounds_, true, std::nullopt, std::nullopt};
  if (sim_start_) s.sim_seconds = *t_.virtual_time() - *sim_start_;
  return s;
}

}  // namespace sparq
