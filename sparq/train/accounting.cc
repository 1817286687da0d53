#include "sparq/train/accounting.h"

#include <fmt/format.h>

#include <algorithm>

#include "sparq/coll/allreduce.h"

namespace sparq {

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

void report_accounting(const Accounting& acct, std::size_t steps, const std::string& title, TrainerSink& out,
                       bool ps) {
  out.line(fmt::format("accounting ({}, {} steps):\n", title, steps));
  out.line(fmt::format("{:>9} {:>14} {:>14} {:>16} {:>8} {:>8} {:>11} {:>9} {:>9}\n", "entity", "bytes/step",
                       "bytes_sent", "fp32_bytes", "ratio", "kept_%", "compress_s", "comm_s", "wait_s"));
  for (const auto& [name, x] : acct.rows) {
    const double per_step = steps ? static_cast<double>(x.bytes_sent) / static_cast<double>(steps) : 0;
    const double kept = x.values ? 100.0 * static_cast<double>(x.kept) / static_cast<double>(x.values) : 0;
    out.line(fmt::format("{:>9} {:>14.0f} {:>14} {:>16} {:>7.2f}x {:>8.3f} {:>11.3f} {:>9.3f} {:>9.3f}{}\n", name,
                         per_step, x.bytes_sent, x.dense_bytes, ratio(x), kept, x.compress_seconds, x.comm_seconds,
                         x.wait_seconds, x.counted ? "" : "  (native MPI: bytes not counted)"));
    out.event({{"event", "accounting"}, {"entity", name}, {"steps", steps}, {"bytes_sent", x.bytes_sent},
               {"bytes_per_step", per_step}, {"dense_bytes", x.dense_bytes}, {"ratio", ratio(x)},
               {"kept_percent", kept}, {"compress_s", x.compress_seconds}, {"comm_s", x.comm_seconds},
               {"wait_s", x.wait_seconds}, {"counted", x.counted}, {"baseline", std::string(baseline_of(name, ps))}});
  }
  for (const auto& row : acct.rows)
    out.line(fmt::format("{:>9}: fp32_bytes = {}\n", row.first, baseline_of(row.first, ps)));
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

}  // namespace sparq
