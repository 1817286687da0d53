#pragma once
// Where truncated Newton (linear_newton.cc) keeps its vectors and how a sum
// over the ranks reaches them. Each rank holds the features of its own rows
// (`held`, sorted) and owns a range of [0, dim): its vectors (weights,
// gradient, direction) cover the owned range only, and
//  - reduce() sums every rank's values on its held features into the owned range,
//  - gather() brings the owned values back to the ranks that hold them,
//  - sum() adds the ranks' partial dot products over their owned ranges.
// Two layouts: `owners` (each rank owns 1/P of the features; reduce and
// gather are an OwnerExchange: values only, to and from the owners), and
// `replicated` (every rank owns every feature: reduce is a sparse or dense
// allreduce by --exchange, gather a copy, sum nothing).
#include <memory>
#include <span>
#include <vector>

#include "sparq/train/linear_steps.h"

namespace sparq {

class OwnedSums {
 public:
  virtual ~OwnedSums() = default;
  std::span<const std::uint32_t> held() const { return held_; }
  std::size_t begin() const { return begin_; }
  std::size_t size() const { return size_; }
  bool owns(std::size_t j) const { return j >= begin_ && j - begin_ < size_; }

  // A sum's time goes to `exchange_s`, its bytes and exchange to the tally.
  virtual void reduce(std::span<const float> local, std::span<double> owned, double& exchange_s,
                      EpochTally& tally) = 0;
  virtual void gather(std::span<const double> owned, std::span<float> local, double& exchange_s,
                      EpochTally& tally) = 0;
  virtual void sum(std::span<double> partial, double& exchange_s, EpochTally& tally) = 0;
  // The owned ranges' values gathered onto every rank (dim values).
  virtual std::vector<float> gather_all(std::span<const float> owned) = 0;

 protected:
  std::vector<std::uint32_t> held_;
  std::size_t begin_ = 0, size_ = 0;
};

// o.exchange.owners (or auto): the owner layout; else replicated.
std::unique_ptr<OwnedSums> make_owned_sums(Transport& t, std::vector<std::uint32_t> held, std::size_t dim,
                                           const LinearTrainOptions& o);

// The sorted features of the rows of `a` and `b` together.
std::vector<std::uint32_t> held_features(const SparseRows& a, const SparseRows& b);

}  // namespace sparq
