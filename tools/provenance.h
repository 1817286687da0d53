#pragma once
// What a run ran on, for the config line of its --metrics file, so that a
// stored run says by itself which build and machine made it: the commit
// (a '+' after it: the sources had changes not committed), the compiler,
// the GEMM library and its kernels, the MPI library, the CPU, its
// instruction sets that sparq's kernels choose between, and its cores.
#include <nlohmann/json.hpp>

#include "sparq/model/blas.h"

namespace sparq::cli {

nlohmann::json build_record(GemmPrecision mlp);
nlohmann::json machine_record();

}  // namespace sparq::cli
