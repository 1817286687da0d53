#pragma once
// What a rank put on the wire per entity (W_grad, emb_fwd, X_act, ...),
// cumulative: the table printed at the end of a distributed run, and its
// events in --metrics. Bytes come from the transport counters, against the
// plain fp32 exchange of the same data a user would run instead (baseline_of).
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sparq/train/grad_exchange.h"
#include "sparq/train/sink.h"
#include "sparq/transport/transport.h"

namespace sparq {

struct Accounting {
  std::vector<std::pair<std::string, ExchangeStats>> rows;  // entities in first-seen order
  void add(const std::string& name, const ExchangeStats& x);
  void add(const Accounting& o);
  double wait_seconds() const;
};

double ratio(const ExchangeStats& x);  // fp32 bytes / bytes sent

// What an entity's fp32 bytes count, in words (`ps`: a parameter-server worker's pushes).
std::string_view baseline_of(std::string_view entity, bool ps);
// The table, then one line per entity saying what its ratio is against.
void report_accounting(const Accounting& acct, std::size_t steps, const std::string& title, TrainerSink& out,
                       bool ps = false);

// Sums every rank's accounting (model parallelism: each cut's traffic is sent
// by its two stages). Every rank holds the same entities in the same order.
Accounting sum_over_ranks(Transport& t, Accounting acct);

}  // namespace sparq
