#include "tools/train_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <ctime>
#include <limits>
#include <numeric>

#include "sparq/coll/allreduce.h"
#include "sparq/core/memory.h"
#include "sparq/model/loss.h"
#include "sparq/model/metrics.h"

namespace sparq::cli {

std::optional<EvalResult> evaluate(const std::function<std::vector<float>(const Batch&)>& logits_of,
                                   const RecordSet& test, const DlrmConfig& cfg, std::size_t batch) {
  BatchPlan plan(test.size(), {.batch = batch, .shuffle = false});
  std::vector<float> scores, labels;
  scores.reserve(test.size());
  labels.reserve(test.size());
  Batch b;
  double loss_sum = 0;
  for (std::size_t i = 0; i < plan.num_batches(); ++i) {
    plan.fill(i, test.records(), cfg.table_rows, b);
    const std::vector<float> z = logits_of(b);
    if (z.empty() && b.size > 0) continue;
    loss_sum += bce_with_logits<float>(std::span<const float>(z), b.labels, {}) * static_cast<double>(b.size);
    for (std::size_t k = 0; k < b.size; ++k) {
      scores.push_back(sigmoid(z[k]));
      labels.push_back(b.labels[k]);
    }
  }
  if (scores.empty()) return std::nullopt;
  EvalResult r;
  r.loss = loss_sum / static_cast<double>(scores.size());
  r.accuracy = accuracy(scores, labels);
  r.auc = roc_auc(scores, labels);
  r.positive_rate = std::accumulate(labels.begin(), labels.end(), 0.0) / static_cast<double>(labels.size());
  return r;
}

double EvalResult::ne() const {
  const double p = positive_rate;
  if (p <= 0 || p >= 1) return std::numeric_limits<double>::quiet_NaN();
  return loss / -(p * std::log(p) + (1 - p) * std::log(1 - p));
}

nlohmann::json config_event(const TrainArgs& a, int ranks, std::string_view transport) {
  nlohmann::json flags = nlohmann::json::object();
  for (const auto& [name, text] : a.flag_values) {  // numbers and booleans as such, the rest as given
    auto v = nlohmann::json::parse(text, nullptr, false);
    flags[name] = v.is_discarded() || !(v.is_number() || v.is_boolean()) ? nlohmann::json(text) : v;
  }
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char start[32];
  std::strftime(start, sizeof start, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return {{"event", "config"}, {"flags", flags},           {"ranks", ranks},
          {"transport", transport}, {"version", SPARQ_VERSION}, {"start_time", start}};
}

void Accounting::add(const std::string& name, const ExchangeStats& x) {
  auto it = std::find_if(rows.begin(), rows.end(), [&](const auto& r) { return r.first == name; });
  (it == rows.end() ? rows.emplace_back(name, ExchangeStats{}).second : it->second) += x;
}

void Accounting::add(const Accounting& o) {
  for (const auto& [name, x] : o.rows) add(name, x);
}

double Accounting::wait_seconds() const {
  double w = 0;
  for (const auto& r : rows) w += r.second.wait_seconds;
  return w;
}

double ratio(const ExchangeStats& x) {
  return x.bytes_sent ? static_cast<double>(x.dense_bytes) / static_cast<double>(x.bytes_sent) : 0;
}

std::string_view baseline_of(std::string_view entity, bool ps) {
  if (entity == "W_grad") return ps ? "a push of the dense gradients" : "a dense ring allreduce of the gradients";
  if (entity == "emb_grad")
    return ps ? "a push of the touched rows (4-byte row index + fp32 values)"
              : "an allgather of every rank's touched rows (4-byte row index + fp32 values)";
  if (entity == "emb_fwd" || entity == "emb_bwd") return "the alltoall's blocks in fp32";
  if (entity == "X_act" || entity == "X_grad") return "the dense tensor across the cut";
  if (entity == "pull") return "what was received (not compressed)";
  return "the exchange in fp32";
}

void report_accounting(const Accounting& acct, std::size_t steps, const std::string& title, const Say& say,
                       const Emit& emit, bool ps) {
  say(fmt::format("accounting ({}, {} steps):\n", title, steps));
  say(fmt::format("{:>9} {:>14} {:>14} {:>16} {:>8} {:>8} {:>11} {:>9} {:>9}\n", "entity", "bytes/step",
                  "bytes_sent", "fp32_bytes", "ratio", "kept_%", "compress_s", "comm_s", "wait_s"));
  for (const auto& [name, xs] : acct.rows) {
    const ExchangeStats* x = &xs;
    const double per_step = steps ? static_cast<double>(x->bytes_sent) / static_cast<double>(steps) : 0;
    const double kept = x->values ? 100.0 * static_cast<double>(x->kept) / static_cast<double>(x->values) : 0;
    say(fmt::format("{:>9} {:>14.0f} {:>14} {:>16} {:>7.2f}x {:>8.3f} {:>11.3f} {:>9.3f} {:>9.3f}{}\n", name,
                    per_step, x->bytes_sent, x->dense_bytes, ratio(*x), kept, x->compress_seconds, x->comm_seconds,
                    x->wait_seconds, x->counted ? "" : "  (native MPI: bytes not counted)"));
    emit({{"event", "accounting"}, {"entity", name}, {"steps", steps}, {"bytes_sent", x->bytes_sent},
          {"bytes_per_step", per_step}, {"dense_bytes", x->dense_bytes}, {"ratio", ratio(*x)},
          {"kept_percent", kept}, {"compress_s", x->compress_seconds}, {"comm_s", x->comm_seconds}, {"wait_s", x->wait_seconds},
          {"counted", x->counted}, {"baseline", std::string(baseline_of(name, ps))}});
  }
  for (const auto& row : acct.rows) say(fmt::format("{:>9}: fp32_bytes = {}\n", row.first, baseline_of(row.first, ps)));
}

Accounting sum_over_ranks(Transport& t, Accounting acct) {
  std::vector<double> v;
  for (const auto& [name, x] : acct.rows)
    v.insert(v.end(), {double(x.bytes_sent), double(x.dense_bytes), double(x.kept), double(x.values),
                       x.compress_seconds, x.comm_seconds, x.wait_seconds});
  allreduce(t, std::span<double>(v));
  for (std::size_t i = 0; i < acct.rows.size(); ++i) {
    ExchangeStats& x = acct.rows[i].second;
    const double* f = v.data() + 7 * i;
    x.bytes_sent = static_cast<std::uint64_t>(f[0]), x.dense_bytes = static_cast<std::uint64_t>(f[1]);
    x.kept = static_cast<std::size_t>(f[2]), x.values = static_cast<std::size_t>(f[3]);
    x.compress_seconds = f[4], x.comm_seconds = f[5], x.wait_seconds = f[6];
  }
  return acct;
}

void report_memory(Transport& t, int ranks_here, const Say& say, const Emit& emit) {
  std::array<double, 1> peak{static_cast<double>(peak_resident_memory())};
  allreduce(t, std::span<double>(peak), {.op = ReduceOp::Max});
  constexpr double kMiB = 1024.0 * 1024;
  const double per_rank = peak[0] / ranks_here;
  if (ranks_here > 1)
    say(fmt::format("memory: peak {:.0f} MiB resident for {} in-process ranks, {:.1f} MiB per rank\n", peak[0] / kMiB,
                    ranks_here, per_rank / kMiB));
  else
    say(fmt::format("memory: peak {:.0f} MiB resident{}\n", peak[0] / kMiB,
                    t.size() > 1 ? fmt::format(" in the largest of {} rank processes", t.size()) : ""));
  emit({{"event", "memory"}, {"peak_rss_bytes", peak[0]}, {"ranks_per_process", ranks_here},
        {"peak_rss_per_rank_bytes", per_rank}});
}

}  // namespace sparq::cli
