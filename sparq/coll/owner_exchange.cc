#include "sparq/coll/owner_exchange.h"

#include <algorithm>

#include "sparq/coll/alltoall.h"
#include "sparq/coll/patterns.h"
#include "sparq/core/error.h"

namespace sparq {

namespace {

constexpr std::size_t kValue = sizeof(float);
static_assert(sizeof(std::uint32_t) == kValue, "the index lists travel in the values' counts");

}  // namespace

OwnerExchange::OwnerExchange(Transport& t, std::span<const std::uint32_t> mine, std::size_t dim, Millis timeout)
    : timeout_(timeout), held_(mine.size()) {
  const int p = t.size();
  const pattern::Partition part{dim, p};
  begin_ = part.offset(t.rank()), size_ = part.len(t.rank());
  SPARQ_CHECK_AS(InputError, std::adjacent_find(mine.begin(), mine.end(), std::greater_equal<>()) == mine.end() &&
                                 (mine.empty() || mine.back() < dim),
                 "owner exchange: this rank's indices must be sorted, unique and below {}", dim);
  std::vector<std::int64_t> send(p, 0), recv(p, 0);
  for (int q = 0, k = 0; q < p; ++q) {
    const std::size_t end = part.offset(q) + part.len(q);
    const int first = k;
    while (static_cast<std::size_t>(k) < mine.size() && mine[k] < end) ++k;
    send[q] = k - first;
  }
  AlltoallOptions ao{.tag = tags::kOwnerExchange, .timeout = timeout_};
  alltoall(t, std::span<const std::int64_t>(send), std::span<std::int64_t>(recv), ao);
  to_owner_.resize(p), from_rank_.resize(p);
  std::size_t total = 0;
  for (int q = 0; q < p; ++q) {
    SPARQ_CHECK_AS(WireError, recv[q] >= 0 && static_cast<std::size_t>(recv[q]) <= size_,
                   "owner exchange: rank {} holds {} indices of my range of {}", q, recv[q], size_);
    to_owner_[q] = send[q] * kValue, from_rank_[q] = recv[q] * kValue;
    total += recv[q];
  }
  at_.resize(total);
  alltoallv(t, std::as_bytes(mine), to_owner_, std::as_writable_bytes(std::span(at_)), from_rank_, ao);
  for (int q = 0, k = 0; q < p; ++q) {
    std::uint32_t last = 0;
    for (std::int64_t i = 0; i < recv[q]; ++i, ++k) {
      const std::uint32_t j = at_[k];
      SPARQ_CHECK_AS(WireError, j >= begin_ && j - begin_ < size_ && (i == 0 || j > last),
                     "owner exchange: rank {} sent index {} (not sorted, or outside my range [{}, {}))", q, j, begin_,
                     begin_ + size_);
      last = j;
      at_[k] = static_cast<std::uint32_t>(j - begin_);
    }
  }
  buf_.resize(total);
}

CollStats OwnerExchange::reduce(Transport& t, std::span<const float> local, std::span<double> owned) {
  SPARQ_CHECK(local.size() == held_ && owned.size() == size_, "owner exchange: reduce of {} / {} values",
              local.size(), owned.size());
  const std::span<float> in(buf_.data(), at_.size());
  AlltoallOptions ao{.tag = tags::kOwnerExchange, .timeout = timeout_};
  CollStats st = alltoallv(t, std::as_bytes(local), to_owner_, std::as_writable_bytes(in), from_rank_, ao);
  sum_.assign(size_, 0.0f);
  for (std::size_t k = 0; k < at_.size(); ++k) sum_[at_[k]] += in[k];
  std::copy(sum_.begin(), sum_.end(), owned.begin());
  st.algo = "owner-alltoall";
  return st;
}

CollStats OwnerExchange::gather(Transport& t, std::span<const double> owned, std::span<float> local) {
  SPARQ_CHECK(local.size() == held_ && owned.size() == size_, "owner exchange: gather of {} / {} values",
              local.size(), owned.size());
  const std::span<float> out(buf_.data(), at_.size());
  for (std::size_t k = 0; k < at_.size(); ++k) out[k] = static_cast<float>(owned[at_[k]]);
  AlltoallOptions ao{.tag = tags::kOwnerExchange, .timeout = timeout_};
  CollStats st = alltoallv(t, std::as_bytes(std::span<const float>(out)), from_rank_, std::as_writable_bytes(local),
                           to_owner_, ao);
  st.algo = "owner-alltoall";
  return st;
}

}  // namespace sparq
