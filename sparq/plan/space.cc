#include "sparq/plan/space.h"

#include <fmt/format.h>

#include <span>

#include "sparq/core/error.h"

namespace sparq::plan {

namespace {

struct DenseChoice {
  const char* codec;
  const char* allreduce;
};

// DCT-DP at the rates the project measured, its values in fp32 and in sparq's
// low-precision streams; the quantized allreduces on the ring (with and
// without error compensation) and recursive doubling.
constexpr DenseChoice kDense[] = {
    {"none", "auto"},          {"dct:0.95,1000", "auto"},      {"dct:0.98,1000", "auto"},
    {"dct:0.98,1000+bf16", "auto"}, {"dct:0.98,1000+fp8", "auto"}, {"q4", "ring"},
    {"q4+ec", "ring"},         {"q4", "recursive-doubling"},
};
// The tables' codecs (fwd, bwd): table-wise, the alltoalls'; replicated, only
// the gradients' row-sparse allreduce, in fp32 or bf16 (sparq's).
constexpr const char* kTableWiseEmb[][2] = {{"fp32", "fp32"}, {"q8", "q8"}, {"q8", "q4"},
                                             {"q4", "q4"},     {"q4", "q2"}, {"q2", "q2"}};
constexpr const char* kReplicatedEmb[][2] = {{"fp32", "fp32"}, {"fp32", "bf16"}};
constexpr const char* kFuse[] = {"0", "1MiB", "4MiB"};
constexpr const char* kMlp[] = {"fp32", "bf16"};
// DCT-MP at the rates the DCT paper's Table 1 and the project's maps measured.
constexpr const char* kCut[] = {"none", "dct:0.90", "dct:0.95", "dct:0.90+bf16"};

int parse_count(const std::string& name, const std::string& s) {
  std::size_t used = 0;
  int t = 0;
  try {
    t = std::stoi(s, &used);
  } catch (const std::exception&) {
  }
  SPARQ_CHECK_AS(InputError, used == s.size() && t >= 1 && t <= 1024, "{} '{}': expected 1 to 1024", name, s);
  return t;
}

// The data-parallel plans of one MLP precision: every placement, dense
// choice, pair of the tables' codecs and fusion; `base` sets the rest.
void data_parallel(const PlanKnobs& base, const std::vector<const char*>& fusions, std::vector<PlanKnobs>& out) {
  for (const std::string placement : {"replicated", "table-wise"})
    for (const DenseChoice& d : kDense)
      for (const auto& [fwd, bwd] : placement == "replicated" ? std::span<const char* const[2]>(kReplicatedEmb)
                                                              : std::span<const char* const[2]>(kTableWiseEmb))
        for (const char* fuse : fusions) {
          PlanKnobs k = base;
          k.placement = placement, k.dp_codec = d.codec, k.dp_allreduce = d.allreduce;
          k.emb_fwd = fwd, k.emb_bwd = bwd, k.fuse = fuse;
          out.push_back(k);
        }
}

// The parameter server's: the replicated model, pushes with DCT-DP or fp32.
void parameter_server(PlanKnobs k, std::vector<PlanKnobs>& out) {
  k.dp_mode = "ps";
  for (const DenseChoice& d : kDense)
    if (d.codec == std::string("none") || std::string(d.codec).starts_with("dct:")) {
      k.dp_codec = d.codec;
      out.push_back(k);
    }
}

}  // namespace

Flags PlanKnobs::flags() const {
  return {{"emb-placement", placement},
          {"dp-codec", dp_codec},
          {"dp-allreduce", dp_allreduce},
          {"emb-codec-fwd", emb_fwd},
          {"emb-codec-bwd", emb_bwd},
          {"fuse-bytes", fuse},
          {"threads", std::to_string(threads)},
          {"mlp-precision", mlp},
          {"mp-splits", mp_splits},
          {"micro-batches", std::to_string(micro_batches)},
          {"mp-codec", mp_codec},
          {"dp-mode", dp_mode},
          {"servers", std::to_string(servers)}};
}

std::string PlanKnobs::label() const {
  std::string s = structure() == "ps"       ? "ps, "
                  : structure() == "hybrid" ? fmt::format("hybrid {} (cut {}), ", mp_splits, mp_codec)
                                            : "";
  s += placement;
  if (placement == "table-wise") s += fmt::format(" {}/{}", emb_fwd, emb_bwd);
  else if (emb_bwd != "fp32") s += fmt::format(" {} grads", emb_bwd);
  s += ", " + dp_codec;
  if (dp_allreduce != "auto") s += "@" + dp_allreduce;
  s += ", fuse " + fuse;
  if (mlp != "fp32") s += fmt::format(", {} MLPs", mlp);
  return threads > 1 ? fmt::format("{}, {} threads", s, threads) : s;
}

std::vector<PlanKnobs> plan_space(int ranks) {
  std::vector<PlanKnobs> out;
  for (const char* mlp : kMlp) {
    PlanKnobs base;
    base.mlp = mlp;
    if (ranks <= 1) {  // no exchange: the MLPs' precision only
      out.push_back(base);
      continue;
    }
    data_parallel(base, {std::begin(kFuse), std::end(kFuse)}, out);
    if (ranks >= 4 && ranks % 2 == 0)  // two stages, and replicas of them to exchange
      for (const char* cut : kCut) {
        PlanKnobs h = base;
        h.mp_splits = "bot:2", h.micro_batches = 2, h.mp_codec = cut;
        data_parallel(h, {"0"}, out);  // the replicas exchange after the pipeline's backward pass: unfused
      }
    if (ranks >= 3) parameter_server(base, out);  // one server, two workers or more
  }
  return out;
}

PlanKnobs knobs_from_flags(const Flags& flags) {
  PlanKnobs k;
  for (const auto& [name, value] : flags) {
    if (name == "emb-placement") k.placement = value;
    else if (name == "dp-codec") k.dp_codec = value;
    else if (name == "dp-allreduce") k.dp_allreduce = value;
    else if (name == "emb-codec-fwd") k.emb_fwd = value;
    else if (name == "emb-codec-bwd") k.emb_bwd = value;
    else if (name == "fuse-bytes") k.fuse = value;
    else if (name == "threads") k.threads = parse_count(name, value);
    else if (name == "mlp-precision") {
      SPARQ_CHECK_AS(InputError, value == "fp32" || value == "bf16", "mlp-precision '{}': expected fp32 or bf16", value);
      k.mlp = value;
    }
    else if (name == "mp-splits") k.mp_splits = value;
    else if (name == "micro-batches") k.micro_batches = parse_count(name, value);
    else if (name == "mp-codec") k.mp_codec = value;
    else if (name == "dp-mode") k.dp_mode = value;
    else if (name == "servers") k.servers = parse_count(name, value);
    else SPARQ_THROW(InputError, "--{} is not a flag a plan sets", name);
  }
  return k;
}

}  // namespace sparq::plan
