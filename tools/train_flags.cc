// `sparq train`'s flags: the reference's names where it has them
// (dlrm_s_pytorch.py), sparq's own for its plans and codecs.
#include <fmt/format.h>

#include <memory>

#include "tools/commands.h"
#include "tools/train.h"
#include "tools/train_flags.h"

namespace sparq::cli {

// The model, its batch and its optimizers.
void add_model_flags(CLI::App* c, TrainArgs& a) {
  c->add_option("--arch-sparse-feature-size", a.emb_dim, "Embedding dimension")->capture_default_str();
  c->add_option("--arch-mlp-bot", a.mlp_bot, "Bottom MLP widths, input first")->capture_default_str();
  c->add_option("--arch-mlp-top", a.mlp_top, "Top MLP widths after the interaction, ending in 1")->capture_default_str();
  c->add_option("--arch-embedding-size", a.emb_size, "Rows per table: 26 dash-separated or one for all")
      ->capture_default_str();
  c->add_option("--mini-batch-size", a.batch, "Training batch size")->capture_default_str();
  c->add_option("--test-mini-batch-size", a.test_batch, "Evaluation batch size")->capture_default_str();
  c->add_option("--learning-rate", a.lr, "Learning rate (dense and embeddings)")->capture_default_str();
  c->add_option("--optimizer", a.optimizer,
                "Dense (MLP) optimizer: sgd, adagrad or adam (PyTorch's formulas and defaults)")
      ->capture_default_str();
  c->add_option("--embedding-optimizer", a.emb_optim, "sgd or rowwise-adagrad")->capture_default_str();
  c->add_option("--lr-num-warmup-steps", a.lr_num_warmup_steps,
                "LR schedule (the reference's): linear warmup over this many steps (0: none)")
      ->capture_default_str();
  c->add_option("--lr-decay-start-step", a.lr_decay_start_step,
                "LR schedule: the step the quadratic decay starts at (>= the warmup steps)")
      ->capture_default_str();
  c->add_option("--lr-num-decay-steps", a.lr_num_decay_steps,
                "LR schedule: decay over this many steps to at least 1e-7, then hold (0: no decay)")
      ->capture_default_str();
}

namespace {

// How long the loop runs, what it prints and how many threads a rank's step has.
void add_loop_flags(CLI::App* c, TrainArgs& a) {
  c->add_option("--nepochs", a.nepochs, "Epochs")->capture_default_str();
  c->add_option("--num-batches", a.num_batches, "Batches per epoch (0 = the whole training set)")->capture_default_str();
  c->add_option("--print-freq", a.print_freq, "Print every N iterations")->capture_default_str()->check(kPositive);
  c->add_option("--test-freq", a.test_freq,
                "Test every N iterations and at the end of each epoch (0: only at the end of each epoch; -1: never, as "
                "the reference's default)")
      ->capture_default_str();
  c->add_option("--threads", a.threads,
                 "Threads of the step: each large GEMM is split over them, and the interaction, embedding and "
                 "SGD loops")
      ->capture_default_str();
}

}  // namespace

// Where the samples come from, and how they are read.
void add_data_flags(CLI::App* c, TrainArgs& a) {
  c->add_option("--data-path", a.data_path, "Directory with train/test .bin/.tsv, or a training file");
  c->add_option("--test-data-path", a.test_data_path, "Test file (when --data-path is a file)");
  c->add_option("--data-generation", a.data_generation, "dataset, synthetic or random")->capture_default_str();
  c->add_option("--data-set", a.data_set, "--raw-data-file's layout: kaggle (one file, 7 days) or terabyte (day files)")
      ->capture_default_str();
  c->add_option("--raw-data-file", a.raw_data_file,
                "Raw Criteo data with the reference's split: kaggle: train.txt; terabyte: the prefix of PREFIX_0 .. "
                "PREFIX_23 (each plain or .gz). The last day: first half test, second half validation");
  c->add_option("--max-ind-range", a.max_ind_range,
                "At most this many rows per table (the reference's flag; sparq hashes values to rows, hash.h; 0: no "
                "cap)")
      ->capture_default_str();
  c->add_option("--data-days", a.data_days, "Days of --raw-data-file (0: 7 for kaggle, 24 for terabyte)")
      ->capture_default_str();
  c->add_option("--data-sub-sample-rate", a.sub_sample_rate,
                "Drop this fraction of the negative training samples of --raw-data-file (as the reference)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.999999));
  c->add_option("--data-size", a.data_size, "Synthetic training samples")->capture_default_str();
  c->add_option("--num-test", a.num_test, "Synthetic test samples")->capture_default_str();
  c->add_option("--data-cache", a.data_cache, "Synthetic: directory to reuse or write the generated data (binary)");
  c->add_option("--zipf", a.zipf, "Synthetic: Zipf exponent")->capture_default_str();
  c->add_option("--cardinalities", a.cardinalities, "Synthetic: distinct values per table");
  c->add_option("--seed", a.seed, "Seed of model init, data order and synthetic data")->capture_default_str();
  c->add_option("--mlp-precision", a.mlp_precision,
                "Operands of the MLPs' GEMMs: fp32, or bf16 (rounded to bfloat16, accumulated in fp32; weights, "
                "gradients and optimizer stay fp32; needs a CPU with AVX512_BF16)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  c->add_flag("--skip-bad-lines", a.skip_bad_lines, "Skip and count malformed TSV lines");
  c->add_flag("--no-shuffle", a.no_shuffle, "Keep the training set's order");
  c->add_flag("--stream", a.stream,
              "Stream a TSV training file each epoch (background parser + shuffle buffer) instead of loading it");
  c->add_option("--shuffle-buffer", a.shuffle_buffer, "--stream: shuffle buffer in records")->capture_default_str();
}

namespace {

// What a run writes and reads: metrics and checkpoints.
void add_output_flags(CLI::App* c, TrainArgs& a) {
  c->add_option("--metrics", a.metrics, "Write JSON lines (one per print/test event) to this file");
  c->add_option("--save", a.save,
                "Save a checkpoint here at the end (and every --save-every steps; \"{step}\" in the path becomes the "
                "step)");
  c->add_option("--save-every", a.save_every, "Save a checkpoint every N steps (0: only at the end)")
      ->capture_default_str();
  c->add_option("--save-whole-every", a.save_whole_every,
                "Incremental checkpoints, written in the background: a whole one every N steps (and the first), "
                "between them deltas of the table rows changed since the previous point (0: every one whole)")
      ->capture_default_str();
  c->add_option("--load", a.load, "Resume from this checkpoint (a delta: its whole chain)");
}

// The parallel plans and their codecs.
void add_parallel_flags(CLI::App* c, TrainArgs& a) {
  c->add_option("--ranks", a.ranks,
                "Data parallel over N in-process ranks (threads); under mpiexec every process is a rank. "
                "--mini-batch-size is the global batch")
      ->check(kPositive);
  c->add_option("--plan", a.plan,
                "Train with the plan sparq plan chose (a plan file), or auto: choose it now on the virtual clock for "
                "--ranks on --net; sets --emb-placement, --dp-codec, --dp-allreduce, --emb-codec-fwd/bwd, "
                "--fuse-bytes and --threads");
  c->add_option("--dp-codec", a.dp_codec,
                "Dense gradient exchange: none, dct:ETA,L (DCT-DP), topk:K/B, q8|q4|q2[+ec|+ec-skip-first], qsgd:BITS "
                "(+ec: error compensation on every hop; +ec-skip-first: not on a ring chunk's first hop, as in "
                "Yang et al.'s Algorithm 2)")
      ->capture_default_str();
  c->add_option("--dp-allreduce", a.dp_allreduce,
                "Collective of the --dp-codec: auto, or for none ring|recursive-doubling|rabenseifner|native, for q* "
                "ring|recursive-doubling, for dct/topk ssar-recursive-double|ssar-split-allgather|"
                "dsar-split-allgather|dense")
      ->capture_default_str();
  c->add_option("--fuse-bytes", a.fuse_bytes,
                "Exchange adjacent layers' gradients together until a group holds this many bytes (e.g. 1MiB; 0: "
                "every tensor alone; auto: 1MiB for a compressed --dp-codec in pure data parallelism, else 0)")
      ->capture_default_str();
  c->add_flag("--no-overlap", a.no_overlap,
              "Exchange the dense gradients after the backward pass instead of layer by layer during it");
  c->add_option("--non-finite", a.non_finite,
                "A NaN or inf in what a rank sends: fail (stop on that step, naming the rank, step and tensor) or "
                "skip (data parallel and --mp-splits: skip the step on every rank, as AMP's GradScaler does, and count it; "
                "data parallelism's exchanges then start after the backward pass)")
      ->check(CLI::IsMember({"fail", "skip"}))
      ->capture_default_str();
  c->add_option("--comm-nice", a.comm_nice,
                fmt::format("Data parallel: the communication thread's nice value, -20 to 0 (default {}): below 0 it "
                            "runs ahead of the compute threads where ranks share cores; 0 leaves it. Needs "
                            "CAP_SYS_NICE or RLIMIT_NICE; where not permitted the run says so and goes on",
                            kDefaultCommNice))
      ->check(CLI::Range(-20, 0));
  c->add_option("--emb-placement", a.emb_placement,
                "replicated (sparse allreduce of embedding gradients) or table-wise (tables spread over ranks, "
                "alltoall of lookups and their gradients)")
      ->capture_default_str();
  c->add_option("--emb-codec-fwd", a.emb_codec_fwd, "Table-wise: codec of the lookups alltoall: fp32, q8, q4, q2")
      ->capture_default_str();
  c->add_option("--emb-codec-bwd", a.emb_codec_bwd,
                "Table-wise: codec of the gradients alltoall: fp32, q8, q4, q2; replicated: the gradients' row-sparse "
                "allreduce in fp32 or bf16")
      ->capture_default_str();
  c->add_option("--emb-row-len", a.emb_row_len,
                "Table-wise: values per quantization row of the alltoalls (each with an fp16 scale and bias)")
      ->capture_default_str()
      ->check(kPositive);
  c->add_option("--mp-splits", a.mp_splits,
                "Model parallel: cut the MLPs after these layers, e.g. bot:2,top:2 (3 stages, one per rank)");
  c->add_option("--micro-batches", a.micro_batches, "Model parallel: micro-batches per step (GPipe schedule)")
      ->capture_default_str()
      ->check(kPositive);
  c->add_option("--mp-codec", a.mp_codec, "Model parallel: what crosses a cut: none, dct:ETA[+bf16][,l1=LAMBDA][,grad=dense] (DCT-MP; +bf16: values in bfloat16; the options study its cost: a penalty on the dropped activations, X_grad sent whole), or the paper's negative baselines "
                "topk-grad:ETA, sketch:ETA")
      ->capture_default_str();
  c->add_option("--mp-threshold-eta", a.mp_threshold_eta,
                "Model parallel: --metrics logs the mean per-sample top-K threshold of X_act at the first cut at this "
                "sparsity (the DCT paper's Figure 5)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  c->add_option("--dp-mode", a.dp_mode,
                "allreduce (synchronous) or ps: the last --servers ranks are parameter servers, the others "
                "asynchronous workers")
      ->capture_default_str();
  c->add_option("--servers", a.servers, "--dp-mode ps: server ranks")->capture_default_str();
  c->add_option("--max-staleness", a.max_staleness,
                "--dp-mode ps: steps a worker may run ahead of the slowest (0: every pull sees the previous step)")
      ->capture_default_str();
  c->add_option("--ef-drain-every", a.ef_drain_every,
                "Error feedback: every N steps zero each residual element with probability --ef-drain-fraction (0: never)")
      ->capture_default_str();
  c->add_option("--ef-drain-fraction", a.ef_drain_fraction, "Error feedback: drain probability")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
}

// Targets, checks, failure testing and the emulated network.
void add_run_flags(CLI::App* c, TrainArgs& a) {
  c->add_option("--fail-at", a.fail_at,
                "Testing: rank R dies at step S (R:S; under mpiexec it kills itself, in-process it falls silent)");
  c->add_option("--target-loss", a.target_loss,
                "Stop at the first test whose loss is <= this and print the training time to reach it (tests at "
                "--test-freq; 0: none)")
      ->capture_default_str();
  c->add_option("--target-auc", a.target_auc,
                "Stop at the first test whose AUC is >= this and print the training time to reach it (0: none)")
      ->capture_default_str();
  c->add_option("--verify-freq", a.verify_freq, "Check every N steps that all ranks hold identical parameters")
      ->capture_default_str();
  c->add_option("--net", a.net,
                "Emulate a network for the --ranks in-process ranks, e.g. 10gbit,20us (bandwidth per link, latency "
                "per message): every message is timed by an alpha-beta model and each rank's computation by its "
                "thread's CPU time (one thread a rank; --threads, if given, emulated: the parts run in turn, charged "
                "as if side by side); progress "
                "lines, metrics and the summary add the modelled times");
  c->add_option("--compute-scale", a.compute_scale,
                "With --net: a rank's modelled computation is its thread's CPU time times this (2: hosts half as "
                "fast as this machine's cores)")
      ->capture_default_str();
  c->add_option("--host-cores", a.host_cores,
                "With --net: the cores a rank's threads (training and communication) compute on; fewer cores than "
                "threads and their computation no longer overlaps (0: a core for each thread)")
      ->capture_default_str();
  c->add_option("--shared-cores", a.shared_cores,
                "With --net: the cores all ranks' threads compute on (hosts emulated on one machine, as "
                "scripts/cluster's: a host that waits lends its core to the others; 0: not shared; not with "
                "--host-cores)")
      ->capture_default_str();
  c->add_option("--kernel-costs", a.kernel_costs,
                "With --net: how the clock charges the kernels (GEMM blocks, the interaction, bias and "
                "activation; by their count of values the embedding rows' work and the codecs): 'measured' (their "
                "CPU time as they ran), 'run' (a cost per kernel and shape, the median of its first 64 calls in "
                "this process, then fixed: runs steadier on a loaded machine) or "
                "FILE (as 'run', the costs read from FILE and written back to it at the end, so that runs charge "
                "the same)")
      ->capture_default_str();
  c->add_option("--timeout", a.timeout_s, "Seconds a rank waits for a peer before failing")
      ->capture_default_str()
      ->check(kPositive);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> flag_values(const CLI::App& c) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const CLI::Option* o : c.get_options()) {
    if (o->get_lnames().empty() || o->get_lnames().front() == "help") continue;
    std::string v;
    if (o->get_type_size() == 0) v = o->count() > 0 ? "true" : "false";  // a flag
    else if (o->count() > 0) v = o->results().back();
    else v = o->get_default_str();
    out.emplace_back(o->get_lnames().front(), v);
  }
  return out;
}

void add_train(CLI::App& app, Run& run) {
  auto a = std::make_shared<TrainArgs>();
  auto* c = app.add_subcommand("train", "Train DLRM with the reference's flags, on one rank or distributed");
  c->footer(R"(Plans (docs/parallelism.md):
  one rank           no --ranks and no mpiexec; --threads splits each step's work
  data parallel      --ranks N (threads of this process) or one rank per mpiexec process;
                     --mini-batch-size is the global batch. Dense gradients: --dp-codec,
                     --dp-allreduce, --fuse-bytes, --no-overlap. Tables: --emb-placement
                     replicated (sparse allreduce of their gradients) or table-wise (tables
                     spread over the ranks, alltoalls coded by --emb-codec-fwd/--emb-codec-bwd)
  model parallel     --mp-splits cuts the MLPs into stages, one rank each, pipelined over
                     --micro-batches; --mp-codec codes what crosses a cut (DCT-MP)
  hybrid             --mp-splits on a multiple of the stage count: replicas of the pipeline,
                     each stage's gradients exchanged among its replicas with --dp-codec
  parameter server   --dp-mode ps: the last --servers ranks hold the model, the others push
                     gradients and pull parameters asynchronously (--max-staleness)
Data: --data-path (TSV, sparq binary, the reference's .npz), --raw-data-file with --data-set
kaggle|terabyte (the reference's split; day files may be .gz), or --data-generation
synthetic|random. --stream reads TSV as it trains, each rank its own shard.
Checkpoints (--save, --save-every, --load) hold the model, the optimizer and every rank's
codec state: a resumed run continues bit for bit.)");
  add_model_flags(c, *a);
  add_loop_flags(c, *a);
  add_data_flags(c, *a);
  add_output_flags(c, *a);
  add_parallel_flags(c, *a);
  add_run_flags(c, *a);
  c->callback([a, c, &run] {
    a->flag_values = flag_values(*c);
    for (const CLI::Option* o : c->get_options())
      if (o->count() > 0 && !o->get_lnames().empty()) a->given.push_back(o->get_lnames().front());
    run = [a] { run_train(*a); };
  });
}


}  // namespace sparq::cli
