#include "sparq/train/linear_owned_sums.h"

#include "sparq/coll/allgather.h"
#include "sparq/coll/allreduce.h"
#include "sparq/coll/owner_exchange.h"
#include "sparq/coll/patterns.h"
#include "sparq/train/grad_exchange.h"
#include "sparq/train/linear_second_order.h"

namespace sparq {

namespace {

using compress::SparseStream;

class Owners final : public OwnedSums {
 public:
  Owners(Transport& t, std::vector<std::uint32_t> held, std::size_t dim, const LinearTrainOptions& o)
      : t_(t), o_(o), clock_(t), dim_(dim), x_(t, held, dim, o.timeout) {
    held_ = std::move(held);
    begin_ = x_.owned_begin(), size_ = x_.owned_size();
  }

  void reduce(std::span<const float> local, std::span<double> owned, double& exchange_s, EpochTally& tally) override {
    const double t0 = clock_.now();
    const CollStats st = x_.reduce(t_, local, owned);
    exchange_s += clock_.now() - t0;
    count(st, tally);
    for (double v : owned) tally.summed_nnz += v != 0;
    tally.summed_dim += owned.size();
    ++tally.steps;
  }

  void gather(std::span<const double> owned, std::span<float> local, double& exchange_s, EpochTally& tally) override {
    const double t0 = clock_.now();
    const CollStats st = x_.gather(t_, owned, local);
    exchange_s += clock_.now() - t0;
    count(st, tally);
  }

  void sum(std::span<double> partial, double& exchange_s, EpochTally& tally) override {
    const double t0 = clock_.now();
    AllreduceOptions ao;
    ao.timeout = o_.timeout;
    const CollStats st = allreduce(t_, partial, ao);
    exchange_s += clock_.now() - t0;
    tally.sent += st.wire.bytes_sent;
  }

  std::vector<float> gather_all(std::span<const float> owned) override {
    const pattern::Partition part{dim_, t_.size()};
    std::vector<std::size_t> counts(t_.size());
    for (int q = 0; q < t_.size(); ++q) counts[q] = part.len(q);
    std::vector<float> all(dim_);
    allgatherv(t_, owned, std::span<float>(all), std::span<const std::size_t>(counts));
    return all;
  }

 private:
  // A reduce and a gather together are one allreduce's worth: each counts half the dense ring's bytes.
  void count(const CollStats& st, EpochTally& tally) {
    tally.sent += st.wire.bytes_sent;
    tally.dense_sent += dense_ring_bytes(t_.size(), dim_) / 2;
    ++tally.algos[st.algo];
  }

  Transport& t_;
  const LinearTrainOptions& o_;
  RunClock clock_;
  std::size_t dim_;
  OwnerExchange x_;
};

class Replicated final : public OwnedSums {
 public:
  Replicated(Transport& t, std::vector<std::uint32_t> held, std::size_t dim, const LinearTrainOptions& o)
      : t_(t), o_(o), clock_(t), dense_(dim) {
    held_ = std::move(held);
    size_ = dim;
  }

  void reduce(std::span<const float> local, std::span<double> owned, double& exchange_s, EpochTally& tally) override {
    const SparseStream mine = SparseStream::sparse(size_, held_, std::vector<float>(local.begin(), local.end()));
    const double t0 = clock_.now();
    std::size_t nnz = 0;
    const CollStats st = sum_to_dense(t_, o_, mine, dense_, &history_, nnz);
    exchange_s += clock_.now() - t0;
    std::copy(dense_.begin(), dense_.end(), owned.begin());
    tally.sent += st.wire.bytes_sent;
    tally.dense_sent += dense_ring_bytes(t_.size(), size_);
    tally.summed_nnz += nnz;
    tally.summed_dim += size_;
    ++tally.algos[st.algo];
    ++tally.steps;
  }

  void gather(std::span<const double> owned, std::span<float> local, double&, EpochTally&) override {
    for (std::size_t k = 0; k < held_.size(); ++k) local[k] = static_cast<float>(owned[held_[k]]);
  }

  void sum(std::span<double>, double&, EpochTally&) override {}

  std::vector<float> gather_all(std::span<const float> owned) override { return {owned.begin(), owned.end()}; }

 private:
  Transport& t_;
  const LinearTrainOptions& o_;
  RunClock clock_;
  SparseAutoHistory history_;
  std::vector<float> dense_;
};

}  // namespace

std::unique_ptr<OwnedSums> make_owned_sums(Transport& t, std::vector<std::uint32_t> held, std::size_t dim,
                                           const LinearTrainOptions& o) {
  if (o.exchange.owners || (!o.exchange.dense && o.exchange.sparse == SparseAlgo::Auto))
    return std::make_unique<Owners>(t, std::move(held), dim, o);
  return std::make_unique<Replicated>(t, std::move(held), dim, o);
}

std::vector<std::uint32_t> held_features(const SparseRows& a, const SparseRows& b) {
  std::vector<std::uint64_t> bits((std::max(a.num_features, b.num_features) + 63) / 64, 0);
  for (const SparseRows* r : {&a, &b})
    for (std::uint32_t j : r->indices) bits[j / 64] |= std::uint64_t{1} << (j % 64);
  std::vector<std::uint32_t> held;
  for (std::size_t w = 0; w < bits.size(); ++w)
    for (std::uint64_t b = bits[w]; b; b &= b - 1)
      held.push_back(static_cast<std::uint32_t>(64 * w + static_cast<std::size_t>(__builtin_ctzll(b))));
  return held;
}

}  // namespace sparq
