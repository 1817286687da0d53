#include "sparq/train/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <memory>

#include "sparq/coll/allreduce.h"
#include "sparq/core/error.h"
#include "sparq/core/memory.h"
#include "sparq/core/parallel_clock.h"
#include "sparq/model/blas.h"
#include "sparq/model/checkpoint.h"
#include "sparq/model/checkpoint_writer.h"
#include "sparq/model/parallel.h"

namespace sparq {

namespace {

// "42s", "3m05s", "2h07m": the ETA of the progress lines.
std::string format_duration(double s) {
  const auto t = static_cast<long long>(std::llround(std::max(s, 0.0)));
  if (t < 60) return fmt::format("{}s", t);
  if (t < 3600) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}h{:02}m", t / 3600, t % 3600 / 60);
}

// "{step}" in the path becomes the step, so saving every N steps can keep
// every checkpoint; without it each save replaces the last.
std::string checkpoint_path(const std::string& pattern, std::size_t step) {
  std::string p = pattern;
  for (auto at = p.find("{step}"); at != std::string::npos; at = p.find("{step}", at))
    p.replace(at, 6, std::to_string(step));
  return p;
}

// Sums over the steps since the last progress line (and, added up, the run's).
struct Window {
  double data = 0, fwd = 0, bwd = 0, opt = 0, comm = 0, iter = 0, v_iter = 0;
  ModeledPhases v_phases;  // data-parallel plans on a virtual clock
  double loss_sum = 0, correct = 0;
  std::size_t its = 0, samples = 0, local_samples = 0;
  double thr_sum = 0;  // model parallel: X_act thresholds at the first cut
  std::size_t thr_rows = 0;
  Accounting traffic;
  void add_times(const Window& w) {
    data += w.data, fwd += w.fwd, bwd += w.bwd, opt += w.opt, comm += w.comm;
    samples += w.samples;
    v_iter += w.v_iter, iter += w.iter, its += w.its;
  }
};

// The sink as rank 0 writes to it: every event gets the run's times.
class TimedSink final : public TrainerSink {
 public:
  TimedSink(TrainerSink& out, Transport& t) : out_(out), lead_(t.rank() == 0), t_(t) { restart(); }
  void line(const std::string& text) override {
    if (lead_) out_.line(text);
  }
  void event(const nlohmann::json& e) override {
    if (!lead_) return;
    nlohmann::json j = e;
    const double wall = seconds_since(start);
    j["wall_s"] = wall;
    if (!j.contains("train_s")) j["train_s"] = wall - eval_s;
    if (modeled()) {
      const double v = vnow() - v_start;
      j["modeled_wall_s"] = v;
      if (!j.contains("modeled_train_s")) j["modeled_train_s"] = v - v_eval;
    }
    out_.event(j);
  }
  bool modeled() const { return t_.virtual_time().has_value(); }
  double vnow() const { return modeled() ? *t_.virtual_time() : 0.0; }
  void restart() {
    start = Clock::now();
    v_start = vnow();
  }

 private:
  TrainerSink& out_;
  bool lead_;
  Transport& t_;

 public:
  Clock::time_point start;
  double v_start = 0;
  double eval_s = 0, v_eval = 0;  // time spent testing, real and modelled
};

// The peak resident memory line of the summary (and its `memory` event). In-
// process ranks (`ranks_here` > 1) share one process and its data set, so a
// rank's part is the process's peak over them; under mpiexec each rank is a
// process and the line gives the largest. Every rank of `t` calls it.
void report_memory(Transport& t, int ranks_here, TrainerSink& out) {
  std::array<double, 1> peak{static_cast<double>(peak_resident_memory())};
  allreduce(t, std::span<double>(peak), {.op = ReduceOp::Max});
  constexpr double kMiB = 1024.0 * 1024;
  const double per_rank = peak[0] / ranks_here;
  if (ranks_here > 1)
    out.line(fmt::format("memory: peak {:.0f} MiB resident for {} in-process ranks, {:.1f} MiB per rank\n",
                         peak[0] / kMiB, ranks_here, per_rank / kMiB));
  else
    out.line(fmt::format("memory: peak {:.0f} MiB resident{}\n", peak[0] / kMiB,
                         t.size() > 1 ? fmt::format(" in the largest of {} rank processes", t.size()) : ""));
  out.event({{"event", "memory"}, {"peak_rss_bytes", peak[0]}, {"ranks_per_process", ranks_here},
             {"peak_rss_per_rank_bytes", per_rank}});
}

class Trainer {
 public:
  Trainer(Plan& plan, const TrainData& data, const TrainerOptions& o, TrainerSink& out)
      : plan_(plan),
        t_(plan.transport()),
        data_(data),
        o_(o),
        out_(out, t_),
        lead_(t_.rank() == 0) {}

  void run() {
    announce();
    if (!o_.load.empty()) resume();
    if (const std::string d = plan_.describe(); !d.empty()) out_.line(d);
    if (plan_.serve(step_)) return;
    restore_states();
    if (o_.save_whole_every > 0 && lead_) writer_.reserve(plan_.model());  // before the steps: it faults in memory
    out_.restart();
    for (std::size_t epoch = step_ / nbatches_; epoch < o_.nepochs && !reached_; ++epoch) {
      if (!run_epoch(epoch)) return;  // --fail-at
      if (!reached_ && o_.test_freq >= 0) test(nbatches_, epoch);
    }
    finish();
  }

 private:
  void announce();
  void resume();
  void restore_states();
  bool run_epoch(std::size_t epoch);
  bool next_batch(std::size_t it);
  void progress(std::size_t epoch, std::size_t it);
  void test(std::size_t it, std::size_t epoch);
  void report_test(std::size_t it, std::size_t epoch);
  void save();
  void finish_saves();
  void summarize();
  void finish();

  Plan& plan_;
  Transport& t_;
  const TrainData& data_;
  const TrainerOptions& o_;
  TimedSink out_;
  const bool lead_;
  std::optional<BatchPlan> batches_;  // once announce() has checked that there are samples
  std::size_t nbatches_ = 0;
  std::size_t step_ = 0;     // batches trained on (or skipped)
  std::size_t skipped_ = 0;  // --non-finite skip: steps skipped; the codecs and the optimizer count step_ - skipped_
  std::vector<Blob> loaded_states_;  // --load: every training rank's codec state
  CheckpointWriter writer_;           // --save-whole-every: rank 0's incremental checkpoints
  double save_ms_ = 0;                // and the time they took from the steps
  std::unique_ptr<StreamBatches> streamer_;
  std::size_t stream_bad_ = 0;
  Batch batch_;
  Window window_, total_;
  Accounting traffic_;  // this rank's, cumulative
  // Tests.
  EvalResult last_eval_;
  bool evaluated_ = false, reached_ = false;
  double best_auc_ = 0;
  double test_at_ = 0, v_test_at_ = 0;  // train_s and modeled_train_s when the current test began
};

// The config event, what the data is, and the model.
namespace {

// The model line's threads: as asked, or what in-process ranks get instead.
std::string threads_text(int asked) {
  if (emulated_threads().clock) return fmt::format("{} a rank (on the virtual clock: parts run in turn, timed as if side by side)", asked);
  if (compute_threads() == asked) return fmt::format("{}", asked);
  return fmt::format("{} a rank (one core each)", compute_threads());
}

}  // namespace

void Trainer::announce() {
  if (!o_.config.is_null()) out_.event(o_.config);
  const TrainData& d = data_;
  if (!d.source.empty()) out_.line(fmt::format("data: {}\n", d.source));
  if (d.streaming())
    out_.line(fmt::format("data: streaming {}{} ({} lines, shuffle buffer {}{})\n", d.stream_files.front(),
                          d.stream_files.size() > 1 ? fmt::format(" .. {}", d.stream_files.back()) : "",
                          d.stream_lines(), o_.shuffle ? o_.shuffle_buffer : 0,
                          t_.size() > 1 ? ", each rank its own shard" : ""));
  out_.line(fmt::format("data: {} train, {} test samples ({:.2f} s to load/generate){}\n", d.train.size(),
                        d.test.size(), d.load_secs,
                        o_.skip_bad_lines ? fmt::format(", skipped {} bad lines", d.bad_lines) : ""));
  if (d.teacher)
    out_.line(fmt::format("teacher (ceiling): test loss {:.6f}, accuracy {:.3f} %, auc {:.4f}\n", d.teacher->loss,
                          100 * d.teacher->accuracy, d.teacher->auc));
  SPARQ_CHECK_AS(InputError, d.train.size() > 0 || d.stream_lines() > 0, "no training samples");
  SPARQ_CHECK_AS(InputError, (o_.target_loss == 0 && o_.target_auc == 0) || d.test.size() > 0,
                 "--target-loss/--target-auc are checked on the test set: this run has no test samples");
  batches_.emplace(d.streaming() ? d.stream_lines() : d.train.size(),
                   BatchPlanOptions{.batch = o_.batch, .shuffle = o_.shuffle, .seed = o_.seed});
  nbatches_ = o_.num_batches ? std::min(o_.num_batches, batches_->num_batches()) : batches_->num_batches();
  const PlanOptions& p = plan_.options();
  std::size_t rows = 0;
  for (auto r : p.cfg.table_rows) rows += r;
  out_.line(fmt::format(
      "model: {} ({} dense parameters{}, {} embedding rows), lr {}{}, optimizer {}, embedding optimizer {}, "
      "threads {}\n",
      p.cfg.describe(), plan_.model().dense().size(), plan_.whole_mlps() ? "" : " on stage 0", rows, p.optimizer.lr,
      p.optimizer.schedule.active() ? " (" + p.optimizer.schedule.describe() + ")" : "", p.optimizer_name,
      p.embedding_optimizer_name,
      threads_text(o_.threads)));
  out_.line(gemm_line(p.cfg.mlp_precision) + "\n");
  if (!o_.plan_line.empty()) out_.line(o_.plan_line + "\n");
}

// --load: the model, the optimizer and the step; the codec states wait for
// restore_states() (the plan's exchanges exist by then).
void Trainer::resume() {
  const auto meta = nlohmann::json::parse(read_checkpoint_meta(o_.load), nullptr, false);
  SPARQ_CHECK_AS(InputError, !meta.is_discarded() && meta.contains("step"), "'{}': checkpoint without a step", o_.load);
  const std::string saved_optim = meta.value("optimizer", "sgd");  // older checkpoints: SGD was the only one
  const std::string& optim = plan_.options().optimizer_name;
  SPARQ_CHECK_AS(InputError, saved_optim == optim,
                 "'{}' was saved with --optimizer {}: resume it with the same optimizer, not {}", o_.load, saved_optim,
                 optim);
  loaded_states_ = plan_.load(o_.load);
  step_ = meta["step"];
  skipped_ = meta.value("skipped_steps", std::size_t{0});
  SPARQ_CHECK_AS(InputError, skipped_ <= step_, "'{}': {} skipped of {} steps", o_.load, skipped_, step_);
  // The schedule and Adam's bias correction continue where they were.
  plan_.optimizer().set_steps(step_ - skipped_);
  out_.line(fmt::format("loaded {} at step {} (epoch {}, it {})\n", o_.load, step_, step_ / nbatches_,
                        step_ % nbatches_));
}

// Residuals belong to a rank's share of the data: on fewer ranks the
// data-parallel plans fold them (they are sums); otherwise the run says it
// starts them afresh.
void Trainer::restore_states() {
  if (loaded_states_.empty()) return;
  Transport& peers = plan_.peers();
  const auto ranks = static_cast<std::size_t>(peers.size());
  if (loaded_states_.size() == ranks) {
    plan_.load_state(loaded_states_[static_cast<std::size_t>(peers.rank())]);
  } else if (const auto folded = plan_.repartition_state(loaded_states_)) {
    plan_.load_state(folded->blob);
    out_.line(fmt::format("note: '{}' holds the codec state of {} ranks, this run has {}: {}\n", o_.load,
                          loaded_states_.size(), ranks, folded->how));
  } else if (plan_.options().dp.codec.kind != DpCodec::Kind::None ||
             plan_.options().mp_codec.kind != MpCodec::Kind::None) {
    out_.line(fmt::format("note: '{}' holds the codec state of {} ranks, this run has {}: error feedback and "
                          "thresholds restart from zero\n",
                          o_.load, loaded_states_.size(), peers.size()));
  }
  loaded_states_.clear();
}

// The steps of one epoch from where the run stands; false when this rank
// stopped at --fail-at.
bool Trainer::run_epoch(std::size_t epoch) {
  if (data_.streaming()) {
    if (streamer_) stream_bad_ += streamer_->bad_lines();
    const StreamOptions so{o_.batch, o_.shuffle ? o_.shuffle_buffer : 0, o_.seed, o_.skip_bad_lines};
    streamer_ = std::make_unique<StreamBatches>(data_, so, epoch, plan_.peers());
    for (std::size_t k = 0; k < step_ % nbatches_; ++k)  // resume: skip what this epoch already trained on
      streamer_->next(o_.batch, plan_.options().cfg.table_rows, batch_);
  } else {
    batches_->start_epoch(epoch);
  }
  for (std::size_t it = step_ % nbatches_; it < nbatches_; ++it) {
    if (t_.rank() == o_.fail_rank && step_ == o_.fail_step) {
      std::fprintf(stderr, "sparq: --fail-at: rank %d stops at step %zu\n", t_.rank(), step_);
      if (t_.name() == "mpi") std::raise(SIGKILL);  // as if killed
      return false;  // in-process: falls silent, the others must notice
    }
    const auto t0 = Clock::now();
    const double v0 = out_.vnow();
    if (!next_batch(it)) break;  // streamed: fewer records than lines (bad lines, sub-sampling)
    window_.data += seconds_since(t0);
    // A skipped step changed nothing: the codecs see the next batch as the
    // same step, as a run without the skipped batch would.
    const StepResult s = plan_.step(batch_, step_ - skipped_);
    if (s.skipped) {
      ++skipped_;
      out_.line(fmt::format("step {} skipped: a rank's gradients hold NaN or inf ({} skipped so far)\n", step_,
                            skipped_));
      out_.event({{"event", "skipped"}, {"step", step_}, {"skipped", skipped_}});
    }
    Window& w = window_;
    w.loss_sum += s.loss_sum;
    w.correct += static_cast<double>(s.correct);
    w.fwd += s.forward_s, w.bwd += s.backward_s, w.opt += s.optimizer_s, w.comm += s.wait_s;
    if (s.modeled) w.v_phases += *s.modeled;
    w.traffic.add(s.traffic);
    w.thr_sum += s.threshold_sum;
    w.thr_rows += s.threshold_rows;
    w.iter += seconds_since(t0);
    w.v_iter += out_.vnow() - v0;
    ++w.its;
    w.samples += batch_.size;
    w.local_samples += s.samples;
    ++step_;
    if (o_.save_every > 0 && step_ % o_.save_every == 0) save();
    if (t_.size() > 1 && o_.verify_freq > 0 && step_ % o_.verify_freq == 0) plan_.verify(step_);
    if ((it + 1) % o_.print_freq == 0 || it + 1 == nbatches_) progress(epoch, it);
    if (o_.test_freq > 0 && (it + 1) % static_cast<std::size_t>(o_.test_freq) == 0 && it + 1 != nbatches_) {
      test(it + 1, epoch);
      if (reached_) break;
    }
  }
  return true;
}

// Batch `it` of the epoch into batch_; false when the stream has ended.
bool Trainer::next_batch(std::size_t it) {
  if (!data_.streaming()) {
    // Every rank takes the global batch's records, or only what its step
    // reads (its share, its tables' ids) where the plan says so.
    const std::optional<BatchPart> part = plan_.batch_part(batches_->batch_size(it));
    batches_->fill(it, data_.train.records(), plan_.options().cfg.table_rows, batch_, part ? &*part : nullptr);
    return true;
  }
  const std::uint64_t sent = streamer_->bytes_sent();
  if (!streamer_->next(o_.batch, plan_.options().cfg.table_rows, batch_)) return false;
  if (t_.size() > 1) {
    ExchangeStats x;  // the records of the global batch, allgathered
    x.bytes_sent = x.dense_bytes = streamer_->bytes_sent() - sent;
    window_.traffic.add("data", x);
  }
  return true;
}

// The progress line and its events, then a new window.
void Trainer::progress(std::size_t epoch, std::size_t it) {
  Window& w = window_;
  // The global batch's mean loss and accuracy: every rank's sums over its samples.
  double sums[3] = {w.loss_sum, static_cast<double>(w.local_samples), w.correct};
  if (plan_.peers().size() > 1) {
    // This allreduce waits for the slowest rank: that wait is the window's
    // steps' (a rank ahead of the others would wait for them in its next
    // step), so it counts in ms/it. Without it, a rank of a faster pipeline
    // stage timed every step alone (--print-freq 1, as sparq plan runs)
    // would leave out the slower stage's time.
    const auto a0 = Clock::now();
    const double v0 = out_.vnow();
    allreduce(plan_.peers(), std::span<double>(sums));
    const double waited = seconds_since(a0), v_waited = out_.vnow() - v0;
    w.iter += waited, w.comm += waited;  // a wait for the others: the phases still add up to the step
    w.v_iter += v_waited, w.v_phases.wait += v_waited;
  }
  // Wall time of the iterations themselves: printing and testing stay out of ms/it.
  const double wall = w.iter;
  const double ms = 1e3 * wall / static_cast<double>(w.its);
  const double loss = sums[0] / sums[1], train_accuracy = sums[2] / sums[1];
  const double n = static_cast<double>(w.its);
  // At this interval's pace, the steps left of the epochs (a target may end sooner).
  const double eta = ms / 1e3 * static_cast<double>(o_.nepochs * nbatches_ - step_);
  const bool modeled = out_.modeled();
  out_.line(fmt::format(
      "Finished training it {}/{} of epoch {}, {:.2f} ms/it, loss {:.6f}, accuracy {:.3f} %, {:.0f} samples/s "
      "(data {:.2f} fwd {:.2f} bwd {:.2f} opt {:.2f}{} ms/it), eta {}{}\n",
      it + 1, nbatches_, epoch, ms, loss, 100 * train_accuracy, static_cast<double>(w.samples) / wall,
      1e3 * w.data / n, 1e3 * w.fwd / n, 1e3 * w.bwd / n, 1e3 * w.opt / n,
      t_.size() > 1 ? fmt::format(" comm wait {:.2f}", 1e3 * w.comm / n) : "", format_duration(eta),
      modeled ? fmt::format(", modeled {:.2f} ms/it", 1e3 * w.v_iter / n) : ""));
  nlohmann::json traffic;  // bytes per step since the last print, per entity
  for (const auto& [name, x] : w.traffic.rows)
    traffic[name] = {{"bytes_per_step", static_cast<double>(x.bytes_sent) / n},
                     {"dense_bytes_per_step", static_cast<double>(x.dense_bytes) / n}, {"ratio", ratio(x)}};
  if (modeled)
    for (const auto& [name, x] : w.traffic.rows) traffic[name]["modeled_ms_per_step"] = 1e3 * x.modeled_seconds / n;
  nlohmann::json ev = {{"event", "train"}, {"epoch", epoch}, {"it", it + 1}, {"nbatches", nbatches_},
                       {"step", step_}, {"loss", loss}, {"accuracy", train_accuracy}, {"eta_s", eta},
                       {"ms_per_it", ms}, {"samples_per_s", static_cast<double>(w.samples) / wall},
                       {"phase_ms", {{"data", 1e3 * w.data / n}, {"forward", 1e3 * w.fwd / n},
                                     {"backward", 1e3 * w.bwd / n}, {"optimizer", 1e3 * w.opt / n},
                                     {"comm_wait", 1e3 * w.comm / n}}},
                       {"traffic", traffic}};
  if (modeled) {
    ev["modeled_ms_per_it"] = 1e3 * w.v_iter / n;
    const ModeledPhases& v = w.v_phases;
    if (v.forward + v.backward > 0)
      ev["modeled_phase_ms"] = {{"forward", 1e3 * v.forward / n}, {"backward", 1e3 * v.backward / n},
                                {"comm_wait", 1e3 * v.wait / n}, {"optimizer", 1e3 * v.optimizer / n}};
  }
  out_.event(ev);
  if (w.thr_rows > 0)  // rank 0 is stage 0 of replica 0: the first cut
    out_.event({{"event", "threshold"}, {"step", step_}, {"eta", plan_.options().mp_threshold_eta},
                {"mean", w.thr_sum / static_cast<double>(w.thr_rows)}});
  traffic_.add(w.traffic);
  total_.add_times(w);
  window_ = {};
}

// A test at step `it` of `epoch`; with a target, every training rank learns
// whether it was reached.
void Trainer::test(std::size_t it, std::size_t epoch) {
  if (data_.test.size() == 0) return;
  const auto e0 = Clock::now();
  const double v0 = out_.vnow();
  test_at_ = seconds_since(out_.start) - out_.eval_s;
  v_test_at_ = v0 - out_.v_start - out_.v_eval;
  report_test(it, epoch);
  const bool has_target = o_.target_loss > 0 || o_.target_auc > 0;
  const auto reaches = [&](const EvalResult& r) {
    return (o_.target_loss > 0 && r.loss <= o_.target_loss) || (o_.target_auc > 0 && r.auc >= o_.target_auc);
  };
  if (has_target && !reached_) {
    double hit = lead_ && evaluated_ && reaches(last_eval_) ? 1 : 0;
    if (plan_.peers().size() > 1) allreduce(plan_.peers(), std::span<double>(&hit, 1), {.op = ReduceOp::Max});
    reached_ = hit > 0;
  }
  out_.eval_s += seconds_since(e0);
  out_.v_eval += out_.vnow() - v0;
  if (!reached_) return;
  const double wall = seconds_since(out_.start);
  out_.line(fmt::format("target reached: test {} at step {} (epoch {}, it {}/{}): {:.3f} s of training ({:.3f} s "
                        "with tests){}\n",
                        o_.target_loss > 0 && last_eval_.loss <= o_.target_loss
                            ? fmt::format("loss {:.6f} <= {}", last_eval_.loss, o_.target_loss)
                            : fmt::format("auc {:.4f} >= {}", last_eval_.auc, o_.target_auc),
                        step_, epoch, it, nbatches_, test_at_, wall,
                        out_.modeled() ? fmt::format("; modeled on {}: {:.3f} s of training", o_.net, v_test_at_) : ""));
  out_.event({{"event", "target"}, {"step", step_}, {"loss", last_eval_.loss}, {"auc", last_eval_.auc},
              {"target_loss", o_.target_loss}, {"target_auc", o_.target_auc}, {"train_s", test_at_},
              {"modeled_train_s", v_test_at_}});
}

void Trainer::report_test(std::size_t it, std::size_t epoch) {
  const std::optional<EvalResult> r = plan_.test(data_.test, o_.test_batch, step_);
  if (!lead_ || !r) return;
  last_eval_ = *r;
  evaluated_ = true;
  best_auc_ = std::max(best_auc_, last_eval_.auc);
  out_.line(fmt::format("Testing at - {}/{} of epoch {}, loss {:.6f}, accuracy {:.3f} %, auc {:.4f}, best auc {:.4f}, "
                        "ne {:.6f}\n",
                        it, nbatches_, epoch, last_eval_.loss, 100 * last_eval_.accuracy, last_eval_.auc, best_auc_,
                        last_eval_.ne()));
  out_.event({{"event", "test"}, {"epoch", epoch}, {"it", it}, {"nbatches", nbatches_}, {"step", epoch * nbatches_ + it},
              {"loss", last_eval_.loss}, {"accuracy", last_eval_.accuracy}, {"auc", last_eval_.auc},
              {"positive_rate", last_eval_.positive_rate}, {"ne", last_eval_.ne()}, {"train_s", test_at_},
              {"modeled_train_s", v_test_at_}});
}

// A checkpoint of the whole model, every training rank's codec state and
// the step (every rank calls it; rank 0 writes).
void Trainer::save() {
  const auto t0 = Clock::now();
  const std::string path = checkpoint_path(o_.save, step_);
  const WholeModel whole = plan_.gather(step_);
  const std::vector<Blob> states = gather_blobs(plan_.peers(), plan_.save_state(), 0);
  if (!lead_) return;
  nlohmann::json meta = o_.checkpoint_meta;
  meta["step"] = step_;
  meta["skipped_steps"] = skipped_;
  meta["state_ranks"] = plan_.peers().size();  // ranks whose codec state the file holds
  if (o_.save_whole_every == 0) {
    save_checkpoint(path, *whole.model, *whole.optimizer, meta.dump(), states);
    out_.line(fmt::format("saved {} at step {}\n", path, step_));
    return;
  }
  SPARQ_CHECK(whole.tracks_changes, "incremental checkpoints of a plan whose changed rows are not tracked");
  const auto s = writer_.save(path, *whole.model, *whole.optimizer, meta.dump(), states,
                              step_ % o_.save_whole_every == 0);
  const double ms = 1e3 * seconds_since(t0);
  save_ms_ += ms;
  out_.line(s.prev.empty()
                ? fmt::format("saving {} at step {} (whole; {:.1f} ms of the step, written behind it)\n", path, step_,
                              ms)
                : fmt::format("saving {} at step {}: a delta of {} ({} of {} table rows changed; {:.1f} ms of the "
                              "step, written behind it)\n",
                              path, step_, s.prev, s.changed, s.rows, ms));
}

// --save-whole-every: the last point on disk, and what the checkpoints cost.
void Trainer::finish_saves() {
  if (o_.save_whole_every == 0 || !lead_) return;
  writer_.wait();
  const auto& w = writer_.totals();
  constexpr double kMB = 1e6;
  out_.line(fmt::format("checkpoints: {} whole ({:.1f} MB) and {} deltas ({:.1f} MB); {:.1f} ms of the steps, "
                        "{:.1f} ms of CPU behind them\n",
                        w.wholes, static_cast<double>(w.whole_bytes) / kMB, w.deltas,
                        static_cast<double>(w.delta_bytes) / kMB, save_ms_, 1e3 * w.cpu_s));
  out_.event({{"event", "checkpoints"}, {"wholes", w.wholes}, {"whole_bytes", w.whole_bytes}, {"deltas", w.deltas},
              {"delta_bytes", w.delta_bytes}, {"step_ms", save_ms_}, {"writer_cpu_s", w.cpu_s}});
}

// The summary lines and event: throughput, the modelled times, the teacher gap.
void Trainer::summarize() {
  const Window& w = total_;
  const double train_wall = seconds_since(out_.start);
  const bool modeled = out_.modeled();
  if (w.samples > 0) {
    const double compute = w.fwd + w.bwd + w.opt + w.comm;
    const double samples = static_cast<double>(w.samples);
    const double flops = 6.0 * static_cast<double>(plan_.model().mlp_macs_per_sample()) * samples;
    out_.line(fmt::format(
        "summary: {} samples, compute (fwd+loss+bwd+update) {:.0f} samples/s, with data assembly {:.0f} samples/s "
        "(data path {:.1f} % of step time){}\n",
        w.samples, samples / compute, samples / (compute + w.data), 100 * w.data / (compute + w.data),
        plan_.whole_mlps() ? fmt::format(", MLP {:.1f} GFLOP/s over fwd+bwd", flops / (w.fwd + w.bwd) / 1e9) : ""));
    const double its = static_cast<double>(w.its);
    if (modeled)
      out_.line(fmt::format(
          "modeled on {}: {:.2f} ms/it, {:.3f} s of training ({:.3f} s with tests; real: {:.2f} ms/it)\n", o_.net,
          1e3 * w.v_iter / its, out_.vnow() - out_.v_start - out_.v_eval, out_.vnow() - out_.v_start,
          1e3 * w.iter / its));
    const bool has_target = o_.target_loss > 0 || o_.target_auc > 0;
    nlohmann::json ev = {{"event", "summary"}, {"samples", w.samples}, {"train_wall_s", train_wall}, {"steps", step_},
                         {"target_reached", has_target ? nlohmann::json(reached_) : nlohmann::json()},
                         {"compute_samples_per_s", samples / compute},
                         {"samples_per_s_with_data", samples / (compute + w.data)},
                         {"ms_per_it", 1e3 * w.iter / its}, {"load_s", data_.load_secs},
                         {"bad_lines", data_.bad_lines}, {"skipped_steps", skipped_}};
    if (modeled) ev["modeled_ms_per_it"] = 1e3 * w.v_iter / its;
    if (o_.plan_ms > 0) {
      const double ms = 1e3 * (modeled ? w.v_iter : w.iter) / its;
      out_.line(fmt::format("plan: {} {:.2f} ms/it against the {:.2f} ms/it sparq plan modelled ({:.2f}x)\n",
                            modeled ? "modelled" : "measured", ms, o_.plan_ms, ms / o_.plan_ms));
      ev["plan_ms_per_it"] = o_.plan_ms;
    }
    out_.event(ev);
  }
  if (data_.teacher && evaluated_)
    out_.line(fmt::format("teacher gap: teacher auc {:.4f}, model auc {:.4f}, gap {:.4f}\n", data_.teacher->auc,
                          last_eval_.auc, data_.teacher->auc - last_eval_.auc));
}

void Trainer::finish() {
  // A target reached between two progress lines: its steps count too.
  traffic_.add(window_.traffic);
  total_.add_times(window_);
  if ((o_.target_loss > 0 || o_.target_auc > 0) && !reached_)
    out_.line(fmt::format("target not reached: {} after {} steps (last test: loss {:.6f}, auc {:.4f})\n",
                          o_.target_loss > 0 ? fmt::format("test loss <= {}", o_.target_loss)
                                             : fmt::format("test auc >= {}", o_.target_auc),
                          step_, last_eval_.loss, last_eval_.auc));
  summarize();
  if (streamer_) stream_bad_ += streamer_->bad_lines();
  if (o_.skip_bad_lines) out_.line(fmt::format("skipped {} bad lines\n", data_.bad_lines + stream_bad_));
  if (skipped_ > 0) out_.line(fmt::format("skipped {} of {} steps: their gradients held NaN or inf\n", skipped_, step_));
  plan_.report(traffic_, step_, out_);
  report_memory(plan_.peers(), o_.ranks_here, out_);
  if (!o_.save.empty() && (o_.save_every == 0 || step_ % o_.save_every != 0)) save();
  finish_saves();
  plan_.finish();
}

}  // namespace

void train(Plan& plan, const TrainData& data, const TrainerOptions& o, TrainerSink& out) {
  Trainer(plan, data, o, out).run();
}

}  // namespace sparq
