#include "tools/provenance.h"

#include <mpi.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "sparq_commit.h"  // SPARQ_COMMIT, written at every build (tools/commit.cmake)

namespace sparq::cli {

namespace {

// The first line of MPI_Get_library_version (callable before MPI_Init).
std::string mpi_library() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) return "unknown";
  const std::string s(text, static_cast<std::size_t>(len));
  return s.substr(0, s.find_first_of(",\n"));
}

// The value of the first "KEY<tabs>: value" line of /proc/cpuinfo.
std::string cpuinfo(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon != std::string::npos && line.find_first_not_of(" \t", key.size()) == line.find(':'))
      return line.substr(line.find_first_not_of(' ', colon + 1));
  }
  return "";
}

}  // namespace

nlohmann::json build_record(GemmPrecision mlp) {
#if defined(__clang__)
  const char* compiler = "clang " __clang_version__;
#else
  const char* compiler = "g++ " __VERSION__;
#endif
  return {{"commit", SPARQ_COMMIT}, {"compiler", compiler}, {"gemm", gemm_line(mlp)}, {"mpi", mpi_library()}};
}

nlohmann::json machine_record() {
  // The instruction sets sparq's kernels and oneDNN's choose between; the
  // whole flags line is ~1.5 KB of mostly irrelevant names.
  static const std::set<std::string> kernel_isas = {
      "sse4_2",     "avx",         "avx2",        "fma",      "f16c",     "avx512f",  "avx512bw",
      "avx512vl",   "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8"};
  std::istringstream flags(cpuinfo("flags"));
  nlohmann::json isas = nlohmann::json::array();
  for (std::string f; flags >> f;)
    if (kernel_isas.count(f)) isas.push_back(f);
  const std::string cpu = cpuinfo("model name");
  return {{"cpu", cpu.empty() ? "unknown" : cpu}, {"isas", isas}, {"cores", std::thread::hardware_concurrency()}};
}

}  // namespace sparq::cli
