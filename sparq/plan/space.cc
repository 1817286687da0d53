#include "sparq/plan/space.h"

#include <fmt/format.h>

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
constexpr const char* kEmb[][2] = {{"fp32", "fp32"}, {"q8", "q8"}, {"q8", "q4"}, {"q4", "q4"}, {"q4", "q2"}, {"q2", "q2"}};
constexpr const char* kFuse[] = {"0", "1MiB", "4MiB"};
constexpr const char* kMlp[] = {"fp32", "bf16"};

int parse_threads(const std::string& s) {
  std::size_t used = 0;
  int t = 0;
  try {
    t = std::stoi(s, &used);
  } catch (const std::exception&) {
  }
  SPARQ_CHECK_AS(InputError, used == s.size() && t >= 1 && t <= 1024, "threads '{}': expected 1 to 1024", s);
  return t;
}

}  // namespace

Flags PlanKnobs::flags() const {
  return {{"emb-placement", placement}, {"dp-codec", dp_codec},   {"dp-allreduce", dp_allreduce},
          {"emb-codec-fwd", emb_fwd},   {"emb-codec-bwd", emb_bwd}, {"fuse-bytes", fuse},
          {"threads", std::to_string(threads)}, {"mlp-precision", mlp}};
}

std::string PlanKnobs::label() const {
  std::string s = placement;
  if (placement == "table-wise") s += fmt::format(" {}/{}", emb_fwd, emb_bwd);
  s += ", " + dp_codec;
  if (dp_allreduce != "auto") s += "@" + dp_allreduce;
  s += ", fuse " + fuse;
  if (mlp != "fp32") s += fmt::format(", {} MLPs", mlp);
  return threads > 1 ? fmt::format("{}, {} threads", s, threads) : s;
}

std::vector<PlanKnobs> plan_space(int ranks) {
  std::vector<PlanKnobs> out;
  for (const char* mlp : kMlp) {
    if (ranks <= 1) {  // no exchange: the MLPs' precision only
      out.push_back({.mlp = mlp});
      continue;
    }
    for (const std::string placement : {"replicated", "table-wise"})
      for (const DenseChoice& d : kDense)
        for (const auto& [fwd, bwd] : kEmb) {
          if (placement == "replicated" && fwd != std::string("fp32")) break;  // the alltoall codecs are table-wise's
          for (const char* fuse : kFuse) out.push_back({placement, d.codec, d.allreduce, fwd, bwd, fuse, 1, mlp});
        }
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
    else if (name == "threads") k.threads = parse_threads(value);
    else if (name == "mlp-precision") {
      SPARQ_CHECK_AS(InputError, value == "fp32" || value == "bf16", "mlp-precision '{}': expected fp32 or bf16", value);
      k.mlp = value;
    }
    else SPARQ_THROW(InputError, "--{} is not a flag a plan sets", name);
  }
  return k;
}

}  // namespace sparq::plan
