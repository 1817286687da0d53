#include "sparq/plan/evidence.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string_view>

namespace sparq::plan {

namespace {

constexpr EvidenceRow kRows[] = {
#include "sparq/plan/evidence_table.inc"
};

constexpr int kMinSeeds = 2;

// The stored row of a codec on data set `data` nearest to `ranks` in log
// scale, if within 2x.
const EvidenceRow* nearest(std::string_view kind, std::string_view codec, std::string_view data, int ranks) {
  const EvidenceRow* best = nullptr;
  double dist = std::log2(2.0) + 1e-9;
  for (const EvidenceRow& r : kRows) {
    if (kind != r.kind || codec != r.codec || data != r.data) continue;
    const double d = std::abs(std::log2(static_cast<double>(r.ranks) / ranks));
    if (d <= dist) best = &r, dist = d;
  }
  return best;
}

// Of the data sets a codec was measured on, the row (nearest to `ranks`,
// within 2x) of the set where it cost most: a codec is as good as its worst
// data set, not its average one.
const EvidenceRow* worst_set(std::string_view kind, std::string_view codec, int ranks) {
  const EvidenceRow* worst = nullptr;
  for (const EvidenceRow& r : kRows) {
    if (kind != r.kind || codec != r.codec) continue;
    const EvidenceRow* n = nearest(kind, codec, r.data, ranks);
    if (n && (!worst || n->mean_change > worst->mean_change)) worst = n;
  }
  return worst;
}

struct Part {
  const char* kind;
  std::string codec;
};

}  // namespace

std::span<const EvidenceRow> evidence_rows() { return kRows; }

Verdict judge(const PlanKnobs& k, int ranks, double budget) {
  Verdict v{true, 0, ""};
  std::vector<Part> parts;
  if (k.dp_mode == "ps")  // asynchronous: the server with its push codec is one codec
    parts.push_back({"ps", k.dp_codec});
  else if (k.dp_codec != "none")
    parts.push_back({"dp", k.dp_codec + (k.dp_allreduce == "auto" ? "" : "@" + k.dp_allreduce)});
  if (k.mp_codec != "none") parts.push_back({"mp", k.mp_codec});
  if (k.emb_fwd != "fp32" || k.emb_bwd != "fp32") parts.push_back({"emb", k.emb_fwd + "/" + k.emb_bwd});
  if (k.mlp != "fp32") parts.push_back({"mlp", k.mlp});
  if (parts.empty()) return {true, 0, "fp32: no codec"};
  std::string backing;
  for (const Part& p : parts) {
    const EvidenceRow* r = worst_set(p.kind, p.codec, ranks);
    if (!r) return {false, 0, fmt::format("{}: no stored run within 2x of {} ranks", p.codec, ranks)};
    if (r->seeds < kMinSeeds)
      return {false, 0, fmt::format("{}: {} seed at {} ranks, fewer than {}", p.codec, r->seeds, r->ranks, kMinSeeds)};
    v.expected_change += std::max(0.0, r->mean_change);  // a codec earns no credit for its seeds' noise
    backing += fmt::format("{}{} {:+.3f} % ({} seeds, {} ranks: {})", backing.empty() ? "" : "; ", p.codec,
                           r->mean_change, r->seeds, r->ranks, r->runs);
  }
  if (v.expected_change > budget)
    return {false, v.expected_change,
            fmt::format("{:+.3f} % expected, over the budget of {:+.3f} % ({})", v.expected_change, budget, backing)};
  v.why = backing;
  return v;
}

}  // namespace sparq::plan
