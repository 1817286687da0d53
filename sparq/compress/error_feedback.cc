#include "sparq/compress/error_feedback.h"

#include "sparq/compress/counter_rng.h"
#include "sparq/core/blob.h"
#include "sparq/core/error.h"

namespace sparq::compress {

void round_with_feedback(SparseStream& sent, std::span<float> e, ValueFormat vf) {
  SPARQ_CHECK_AS(InputError, !sent.is_dense() && e.size() == sent.dim(),
                 "round_with_feedback: needs a sparse stream and a residual of its dimension");
  if (vf == ValueFormat::F32) return;
  const auto idx = sent.indices();
  const auto val = sent.mutable_values();
  thread_local std::vector<float> before;
  before.assign(val.begin(), val.end());
  round_values(val, vf);
  for (std::size_t j = 0; j < idx.size(); ++j) e[idx[j]] += before[j] - val[j];
}

ErrorFeedbackStore::ErrorFeedbackStore(DrainOptions drain) : drain_(drain) {
  SPARQ_CHECK_AS(InputError, drain.fraction >= 0.0 && drain.fraction <= 1.0, "drain fraction {} outside [0, 1]",
                 drain.fraction);
}

std::span<float> ErrorFeedbackStore::residual(std::string_view name, std::size_t n) {
  auto it = buffers_.find(name);
  if (it == buffers_.end()) it = buffers_.emplace(std::string(name), std::vector<float>(n, 0.0f)).first;
  SPARQ_CHECK_AS(InputError, it->second.size() == n, "error feedback: tensor '{}' has {} values, asked for {}", name,
                 it->second.size(), n);
  return it->second;
}

std::span<const float> ErrorFeedbackStore::find(std::string_view name) const {
  auto it = buffers_.find(name);
  return it == buffers_.end() ? std::span<const float>{} : std::span<const float>(it->second);
}

void ErrorFeedbackStore::erase(std::string_view name) {
  if (auto it = buffers_.find(name); it != buffers_.end()) buffers_.erase(it);
}

void ErrorFeedbackStore::add(const ErrorFeedbackStore& other) {
  for (const auto& [name, buf] : other.buffers_) {
    const std::span<float> e = residual(name, buf.size());
    for (std::size_t i = 0; i < buf.size(); ++i) e[i] += buf[i];
  }
}

std::size_t ErrorFeedbackStore::bytes() const {
  std::size_t b = 0;
  for (const auto& [name, buf] : buffers_) b += buf.size() * sizeof(float);
  return b;
}

bool ErrorFeedbackStore::maybe_drain(std::uint64_t step) {
  if (drain_.every == 0 || step == 0 || step % drain_.every != 0) return false;
  // Compare the top 32 random bits with fraction * 2^32 (fraction = 1 drains
  // everything, 0 nothing).
  const double cut = drain_.fraction * 4294967296.0;
  for (auto& [name, buf] : buffers_) {
    const std::uint64_t id = tensor_id(name);
    for (std::size_t i = 0; i < buf.size(); i += 4) {
      const Philox4x32 r = philox4x32({static_cast<std::uint32_t>(i / 4), static_cast<std::uint32_t>(i >> 34),
                                       static_cast<std::uint32_t>(step), static_cast<std::uint32_t>(id ^ (id >> 32))},
                                      drain_.seed);
      for (std::size_t j = 0; j < 4 && i + j < buf.size(); ++j)
        if (static_cast<double>(r[j]) < cut) buf[i + j] = 0.0f;
    }
  }
  ++drains_;
  return true;
}

void ErrorFeedbackStore::save(BlobWriter& w) const {
  w.u64(drains_);
  w.u64(buffers_.size());
  for (const auto& [name, v] : buffers_) {
    w.str(name);
    w.floats(v);
  }
}

void ErrorFeedbackStore::load(BlobReader& r) {
  drains_ = r.u64();
  const std::uint64_t n = r.u64();
  buffers_.clear();
  for (std::uint64_t i = 0; i < n; ++i) {
    std::string name = r.str();
    buffers_[std::move(name)] = r.floats();
  }
}

}  // namespace sparq::compress
