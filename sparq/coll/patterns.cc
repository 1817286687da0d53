#include "sparq/coll/patterns.h"

#include "sparq/core/error.h"

namespace sparq::pattern {

Fold::Fold(int nranks) : p(nranks), pof2(1), rem(0) {
  SPARQ_CHECK(nranks >= 1, "rank count {}", nranks);
  while (pof2 * 2 <= nranks) pof2 *= 2;
  rem = nranks - pof2;
}

std::pair<Window, Window> halve(Window w, int nr, int mask) {
  const int mid = w.lo + (w.hi - w.lo) / 2;
  const Window lower{w.lo, mid}, upper{mid, w.hi};
  return (nr & mask) ? std::pair{upper, lower} : std::pair{lower, upper};
}

Window sibling(Window w, int nr, int mask) {
  const int n = w.hi - w.lo;
  return (nr & mask) ? Window{w.lo - n, w.lo} : Window{w.hi, w.hi + n};
}

}  // namespace sparq::pattern
