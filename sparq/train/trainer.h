#pragma once
// The training loop, the same for every plan (plan.h):
//
//   load (--load) -> for each epoch: for each step:
//       batch (from the loaded set by BatchPlan, or streamed) -> plan.step()
//       -> drain residuals -> checkpoint every save_every -> verify every verify_freq
//       -> progress line every print_freq -> test every test_freq (stops at a target)
//   -> test at each epoch's end -> summary, the plan's report, memory, last checkpoint
//
// Rank 0 writes the progress lines and metrics events to a TrainerSink;
// every event carries the seconds since training started (wall_s) and the
// same less the time spent testing (train_s; a test event: when it began),
// and on a virtual clock (--net) the same on this rank's modelled clock
// (modeled_*), so time to a target does not depend on how often a run tests.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "sparq/train/plan.h"
#include "sparq/train/sink.h"
#include "sparq/train/train_data.h"

namespace sparq {

struct TrainerOptions {
  std::size_t nepochs = 1;
  std::size_t num_batches = 0;  // per epoch (0: the whole training set)
  std::size_t batch = 128;      // the global batch
  std::size_t test_batch = 16384;
  std::size_t print_freq = 1000;
  long test_freq = 0;  // N > 0: every N steps and at each epoch's end; 0: each epoch's end only; -1: never
  bool shuffle = true;
  std::size_t shuffle_buffer = 100000;  // streamed data: records
  bool skip_bad_lines = false;          // streamed data skips them too; the run ends by counting them
  std::uint64_t seed = 1;               // the data's order
  double target_loss = 0, target_auc = 0;  // the first test that reaches one ends training (0: none)
  std::size_t verify_freq = 1000;       // replica check every N steps (0: only at the end)
  std::string load;                     // resume from this checkpoint
  std::string save;                     // checkpoint path ("{step}" becomes the step); empty: none
  std::size_t save_every = 0;           // steps (0: only at the end)
  // > 0: incremental checkpoints, written behind training: a whole one every
  // this many steps (and the first), deltas of the rows changed in between.
  std::size_t save_whole_every = 0;
  nlohmann::json checkpoint_meta;       // written with every checkpoint, "step" and "state_ranks" added
  long fail_rank = -1;                  // testing: this rank stops at fail_step (mpi: dies)
  std::uint64_t fail_step = 0;
  int threads = 1;                      // as asked for, for the model line
  std::string net;                      // the emulated network's text, for the modelled times' lines
  int ranks_here = 1;                   // ranks in this process (the memory line)
  nlohmann::json config;                // the first metrics event (none when null)
  double plan_ms = 0;                   // the step sparq plan modelled for this run's plan (0: none)
  std::string plan_line;                // what sparq plan chose, printed after the model (rank 0)
};

// Trains `plan` on `data` as `o` says; every rank of the plan's transport
// calls it. Rank 0 writes to `out`.
void train(Plan& plan, const TrainData& data, const TrainerOptions& o, TrainerSink& out);

}  // namespace sparq
