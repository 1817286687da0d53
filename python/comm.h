#pragma once
// sparq.Comm: a connected group of ranks, shared by the bindings.
#include <pybind11/pybind11.h>

#include <memory>

#include "sparq/core/error.h"
#include "sparq/transport/transport.h"

namespace sparq {

// Closes `t` on a thread of its own; the threads are joined at the
// interpreter's exit (atexit), after which it closes `t` here.
void close_in_background(std::unique_ptr<Transport> t);

struct Comm {
  std::unique_ptr<Transport> t;
  // Freed, it closes in the background (a Gloo Comm: its goodbye waits for
  // every peer's).
  bool close_when_freed_in_background = false;
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
  // Python frees a Comm whenever its collector runs where the Comm is in a
  // reference cycle (a DDP model and its hook are), at a different moment
  // on each rank: one that waited there for its peers' goodbye would wait
  // while they run collectives it should join, and hold them all up.
  ~Comm() {
    if (!t) return;
    if (close_when_freed_in_background) close_in_background(std::move(t));
    else close();
  }
};

}  // namespace sparq
