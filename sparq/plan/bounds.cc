#include "sparq/plan/bounds.h"

#include <string>

#include "sparq/core/error.h"

namespace sparq::plan {

namespace {

double bits_of(const std::string& codec) {
  if (codec == "fp32") return 32;
  if (codec == "q8") return 8;
  if (codec == "q4") return 4;
  if (codec == "q2") return 2;
  SPARQ_THROW(InputError, "unknown alltoall codec '{}'", codec);
}

double dense_bytes(const PlanKnobs& k, double n, double p) {
  const std::string& c = k.dp_codec;
  if (c == "none") return 2 * (p - 1) / p * n * 4;
  if (c.rfind("q", 0) == 0) return 2 * (p - 1) / p * n * std::stod(c.substr(1)) / 8;  // "q4", "q4+ec"
  if (c.rfind("dct:", 0) == 0) {
    const double eta = std::stod(c.substr(4));
    const double value = c.find("+fp8") != std::string::npos ? 1 : c.find("+bf16") != std::string::npos ? 2 : 4;
    return (1 - eta) * n * value;
  }
  SPARQ_THROW(InputError, "no bound for --dp-codec '{}'", c);
}

}  // namespace

double min_bytes_sent(const PlanKnobs& k, const PlanShape& s) {
  const double p = s.ranks;
  if (s.ranks <= 1 || k.structure() == "hybrid") return 0;
  if (k.structure() == "ps") return dense_bytes(k, static_cast<double>(s.dense_params), 2);  // a worker's push
  double bytes = dense_bytes(k, static_cast<double>(s.dense_params), p);
  if (k.placement == "table-wise") {
    const double batch = static_cast<double>(s.global_batch), dim = static_cast<double>(s.emb_dim);
    const double owned = static_cast<double>(s.tables / static_cast<std::size_t>(s.ranks));
    bytes += owned * batch * (p - 1) / p * dim * bits_of(k.emb_fwd) / 8;
    bytes += (static_cast<double>(s.tables) - owned) * batch / p * dim * bits_of(k.emb_bwd) / 8;
  }
  return bytes;
}

}  // namespace sparq::plan
