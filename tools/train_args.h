#pragma once
// The flags of `sparq train` (tools/train.cc registers them).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sparq::cli {

// --comm-nice's default. On the 4-host emulated cluster (docs/results.md) -10
// made the bf16 DCT-DP step ~5 % shorter and cost nothing measurable elsewhere.
inline constexpr int kDefaultCommNice = -10;

struct TrainArgs {
  std::size_t emb_dim = 16;
  std::string mlp_bot = "13-512-256-64-16";
  std::string mlp_top = "512-256-1";
  std::string emb_size = "100000";
  std::size_t batch = 128;
  std::size_t test_batch = 16384;
  double lr = 0.1;
  std::string emb_optim = "sgd";
  std::string optimizer = "sgd";  // of the dense (MLP) parameters
  // The reference's learning-rate schedule (LrSchedule); signed, so that a
  // negative value gets sparq's error rather than a parse error.
  long lr_num_warmup_steps = 0, lr_decay_start_step = 0, lr_num_decay_steps = 0;
  std::size_t nepochs = 1;
  std::size_t num_batches = 0;  // per epoch; 0 = all
  std::size_t print_freq = 1000;
  long test_freq = 0;           // iterations (and each epoch's end); 0 = each epoch's end only; -1 = never
  std::string data_path, test_data_path;
  // The raw Criteo sets with the reference's split (criteo_days.h).
  std::string data_set = "kaggle", raw_data_file;
  std::size_t data_days = 0;  // 0: the set's (7 or 24)
  std::size_t max_ind_range = 0;  // caps every table's rows (0: no cap)
  double sub_sample_rate = 0;
  std::string data_generation = "dataset";
  std::size_t data_size = 1000000;
  std::size_t num_test = 100000;
  std::string data_cache;
  double zipf = 1.1;
  std::string cardinalities;
  std::uint64_t seed = 1;
  int threads = 2;
  std::string mlp_precision = "fp32";
  bool skip_bad_lines = false;
  bool no_shuffle = false;
  bool stream = false;
  std::size_t shuffle_buffer = 100000;
  std::string metrics, save, load;
  std::size_t save_every = 0;  // steps; 0 = only at the end
  std::size_t save_whole_every = 0;  // steps; 0 = every checkpoint whole
  // Data parallelism: --mini-batch-size is the global batch (the reference's
  // convention), split evenly over the ranks.
  int ranks = 0;
  std::string dp_codec = "none";
  std::string dp_allreduce = "auto";
  std::string fuse_bytes = "auto";
  bool no_overlap = false;
  std::string non_finite = "fail";
  std::optional<int> comm_nice;  // data parallel's communication thread; unset: kDefaultCommNice
  std::string emb_placement = "replicated";
  std::string emb_codec_fwd = "fp32", emb_codec_bwd = "fp32";
  std::size_t emb_row_len = 32;
  // Model parallelism: cut points, micro-batches, what crosses a cut.
  std::string mp_splits;
  std::size_t micro_batches = 1;
  std::string mp_codec = "none";
  double mp_threshold_eta = 0.95;
  // Parameter server.
  std::string dp_mode = "allreduce";
  int servers = 1;
  std::uint64_t max_staleness = 0;
  std::uint64_t ef_drain_every = 0;
  double ef_drain_fraction = 1.0;
  std::string fail_at;  // testing aid: "RANK:STEP"
  double target_loss = 0, target_auc = 0;  // 0: train the whole --nepochs
  std::size_t verify_freq = 1000;
  double timeout_s = 300;
  // In-process ranks on a virtual clock: this network model ("10gbit,20us"),
  // each thread's CPU time times compute_scale as its computation, on
  // host_cores cores a rank (0: a core per thread) or on shared_cores cores
  // that all ranks share (0: not shared).
  std::string net;
  double compute_scale = 1;
  int host_cores = 0;
  int shared_cores = 0;
  // How the clock charges the dense kernels (GEMMs, the interaction, bias
  // and activation): "measured" (their CPU time, as all other work), "run"
  // (a cost per kernel and shape measured in this process, kernel_costs.h)
  // or a file that keeps those costs from run to run.
  std::string kernel_costs = "measured";
  // Every flag by name with its value, as given or by default (the first
  // line of --metrics); filled from the parser, so no flag is left out.
  std::vector<std::pair<std::string, std::string>> flag_values;
  std::vector<std::string> given;  // the flags set on the command line, by name
  std::string plan;                // --plan: a plan file of sparq plan, or "auto"
};

}  // namespace sparq::cli
