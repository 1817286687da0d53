#pragma once
// sparq.Comm: a connected group of ranks, shared by the bindings.
#include <pybind11/pybind11.h>

#include <memory>

#include "sparq/core/error.h"
#include "sparq/transport/transport.h"

namespace sparq {

struct Comm {
  std::unique_ptr<Transport> t;
  Transport& transport() {
    SPARQ_CHECK_AS(InputError, t != nullptr, "this sparq.Comm is closed");
    return *t;
  }
  // Closing waits for every peer's goodbye (GlooTransport): without the GIL,
  // so that the process's other Python threads go on meanwhile. Python
  // always holds the GIL when it drops a Comm.
  void close() {
    auto gone = std::move(t);
    pybind11::gil_scoped_release nogil;
    gone.reset();
  }
  ~Comm() {
    if (t) close();
  }
};

}  // namespace sparq
