// Which launcher started a process, from a table of environments: the
// variables of Open MPI, MPICH's Hydra, Slurm's srun and PMIx, alone and
// nested, and what a batch script without srun holds.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "sparq/transport/launch.h"

namespace sparq {
namespace {

struct Case {
  const char* what;
  std::map<std::string, std::string> env;
  const char* launcher;  // nullptr: none
  int size;
};

TEST(DetectLauncher, Table) {
  const Case cases[] = {
      {"no launcher", {{"HOME", "/root"}}, nullptr, 1},
      {"Open MPI", {{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "2"}}, "Open MPI", 4},
      {"Open MPI -n 1", {{"OMPI_COMM_WORLD_SIZE", "1"}}, "Open MPI", 1},
      {"MPICH/Hydra", {{"PMI_SIZE", "3"}, {"PMI_RANK", "0"}}, "MPICH/Hydra", 3},
      {"srun", {{"SLURM_STEP_NUM_TASKS", "8"}, {"SLURM_NTASKS", "8"}, {"SLURM_PROCID", "5"}}, "Slurm", 8},
      {"batch script: an allocation, no step", {{"SLURM_NTASKS", "8"}, {"SLURM_PROCID", "0"}}, nullptr, 1},
      {"PMIx", {{"PMIX_SIZE", "2"}, {"PMIX_RANK", "1"}}, "PMIx", 2},
      {"Open MPI's mpirun inside srun", {{"OMPI_COMM_WORLD_SIZE", "16"}, {"SLURM_STEP_NUM_TASKS", "2"}}, "Open MPI", 16},
      {"Hydra's proxies started by srun", {{"PMI_SIZE", "8"}, {"SLURM_STEP_NUM_TASKS", "2"}}, "MPICH/Hydra", 8},
      {"srun --mpi=pmix", {{"SLURM_STEP_NUM_TASKS", "4"}, {"PMIX_RANK", "3"}}, "Slurm", 4},
      {"garbage count", {{"PMI_SIZE", "x"}}, "MPICH/Hydra", 1},
  };
  for (const Case& c : cases) {
    const auto l = detect_launcher([&](const char* name) -> const char* {
      const auto it = c.env.find(name);
      return it == c.env.end() ? nullptr : it->second.c_str();
    });
    if (!c.launcher) {
      EXPECT_FALSE(l.has_value()) << c.what;
      continue;
    }
    ASSERT_TRUE(l.has_value()) << c.what;
    EXPECT_EQ(l->name, c.launcher) << c.what;
    EXPECT_EQ(l->size, c.size) << c.what;
  }
}

}  // namespace
}  // namespace sparq
