// A job in which rank 1 fails in the middle of a collective the others are
// waiting in: "throw" raises an error (launch() reports it and aborts the
// job), "exit" kills the process outright. Run by rank_death_test.sh, which
// checks that mpiexec then exits non-zero instead of hanging.
#include <cstdlib>
#include <string>
#include <vector>

#include "sparq/coll/allreduce.h"
#include "sparq/transport/launch.h"

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "throw";
  sparq::launch({}, [&](sparq::Transport& t) {
    if (t.rank() == 1) {
      if (mode == "exit") std::_Exit(3);
      SPARQ_THROW(sparq::Error, "planned failure on rank 1");
    }
    std::vector<float> v(1 << 20, 1.0f);
    sparq::allreduce(t, std::span<float>(v));
  });
  return 0;
}
