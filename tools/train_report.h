#pragma once
// What `sparq train` reports: its configuration, test metrics, and the
// per-entity traffic table.
#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sparq/data/dataset.h"
#include "sparq/model/dlrm.h"
#include "sparq/train/grad_exchange.h"
#include "tools/train_args.h"

namespace sparq::cli {

struct EvalResult {
  double loss = 0, accuracy = 0, auc = 0.5;
  double positive_rate = 0;  // the test set's base CTR p
  // Normalized entropy: loss / -(p log p + (1-p) log(1-p)), the loss against
  // always predicting p; NaN when the test set has one class only.
  double ne() const;
};

// Test metrics over `test`; logits_of(batch) gives the logits, or nothing on
// a rank that does not see them (model parallelism: all but the last stage),
// which then returns nothing.
std::optional<EvalResult> evaluate(const std::function<std::vector<float>(const Batch&)>& logits_of,
                                   const RecordSet& test, const DlrmConfig& cfg, std::size_t batch);

// The first line of a --metrics file: the run's whole configuration, every
// flag of `sparq train` by its name (without the dashes) under "flags", the
// ranks, the transport's name, sparq's version and the start time (UTC).
nlohmann::json config_event(const TrainArgs& a, int ranks, std::string_view transport);

// What this rank put on the wire per entity, cumulative: the table printed
// at the end of a distributed run, and its lines in --metrics. Bytes come
// from the transport counters, against the plain fp32 exchange of the same
// data a user would run instead (baseline_of).
struct Accounting {
  std::vector<std::pair<std::string, ExchangeStats>> rows;  // entities in first-seen order
  void add(const std::string& name, const ExchangeStats& x);
  void add(const Accounting& o);
  double wait_seconds() const;
};

double ratio(const ExchangeStats& x);  // fp32 bytes / bytes sent

using Say = std::function<void(const std::string&)>;
using Emit = std::function<void(const nlohmann::json&)>;
// What an entity's fp32 bytes count, in words (`ps`: a parameter-server worker's pushes).
std::string_view baseline_of(std::string_view entity, bool ps);
// The table, then one line per entity saying what its ratio is against.
void report_accounting(const Accounting& acct, std::size_t steps, const std::string& title, const Say& say,
                       const Emit& emit, bool ps = false);

// Sums every rank's accounting (model parallelism: each cut's traffic is sent
// by its two stages). Every rank holds the same entities in the same order.
Accounting sum_over_ranks(Transport& t, Accounting acct);

// The peak resident memory line of the summary (and its `memory` event). In-
// process ranks (`ranks_here` > 1) share one process and its data set, so a
// rank's part is the process's peak over them; under mpiexec each rank is a
// process and the line gives the largest. Every rank of `t` calls it.
void report_memory(Transport& t, int ranks_here, const Say& say, const Emit& emit);

}  // namespace sparq::cli
