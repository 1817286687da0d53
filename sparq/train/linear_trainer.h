#pragma once
// Data-parallel training of linear models on naturally sparse data (SparCML's
// MPI-OPT, Renggli et al., SC'19, section 8.2): each rank holds its shard of
// the rows and a full copy of the model.
//
//  - sgd: every step each rank computes the loss gradient of `batch` of its
//    rows (sparse: the features those rows touch), the ranks sum them with a
//    sparse allreduce (or, for comparison, densified through a dense
//    allreduce), and every rank applies the same update:
//      w <- (1 - lr_t l2) w - lr_t g / (P batch),  lr_t = lr / (1 + lr_decay e)
//    with e the epochs done (fractional). Nothing is sparsified: the model is
//    exactly what the dense exchange gives (up to the order of float sums).
//  - scd: distributed random block coordinate descent on the primal logistic
//    loss. The features are split into P contiguous ranges (pattern::
//    Partition); each iteration each rank takes the next `coords` features of
//    a random permutation of its range, does one Newton step on each from its
//    own rows (sum of dloss x and of the curvature p(1-p) x^2 over the rows
//    holding the feature, averaged over its rows, plus l2), and the new values
//    are exchanged by a sparse allgather of the ranges (or a dense allgatherv
//    of every range); every rank then moves its rows' margins by the changes.
//    A feature none of the owner's rows holds keeps its value. An epoch
//    updates every feature once.
//
// Per epoch rank 0 prints a line: the progressive training loss (each step's
// loss before its update) and accuracy, the test loss, accuracy and AUC over
// every rank's test rows, the time split into compute, communication (the
// exchange as its fastest rank saw it) and waiting (this rank's exchange time
// beyond that: load imbalance), and the bytes this rank sent against what
// the dense exchange sends. On a virtual clock (--net) the times are modelled.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "sparq/coll/allreduce.h"
#include "sparq/coll/sparse_allreduce.h"
#include "sparq/data/sparse_rows.h"
#include "sparq/model/linear.h"
#include "sparq/train/sink.h"
#include "sparq/transport/transport.h"

namespace sparq {

enum class LinearAlgo { Sgd, Scd };
LinearAlgo parse_linear_algo(std::string_view s);  // "sgd" | "scd"

// How the ranks combine their contributions: sparse (sgd: a sparse allreduce
// algorithm, `auto` choosing by the alpha-beta estimate; scd: the sparse
// allgather) or dense (sgd: an allreduce of the densified gradient, by
// `dense_algo`; scd: allgatherv of every range).
struct LinearExchange {
  bool dense = false;
  SparseAlgo sparse = SparseAlgo::Auto;
  AllreduceAlgo dense_algo = AllreduceAlgo::Auto;
};
// "auto", a sparse allreduce algorithm's name, "sparse" (scd), "dense",
// "dense:ring", "dense:rabenseifner", "dense:recursive-doubling", "dense:native".
LinearExchange parse_linear_exchange(std::string_view s, LinearAlgo algo);
std::string linear_exchange_name(const LinearExchange& x, LinearAlgo algo);

struct LinearTrainOptions {
  LinearLoss loss = LinearLoss::Logistic;
  LinearAlgo algo = LinearAlgo::Sgd;
  LinearExchange exchange{};
  std::size_t batch = 1000;  // sgd: rows per rank and step
  std::size_t coords = 100;  // scd: features per rank and iteration
  double lr = 1.0;           // sgd: the step; scd: the Newton step's multiplier
  double lr_decay = 0;
  double l2 = 0;             // on the mean loss: objective = mean loss + l2/2 |w|^2
  std::size_t epochs = 1;
  std::size_t max_steps = 0;  // steps (sgd) or iterations (scd) per epoch; 0 = a whole pass
  std::uint64_t seed = 1;
  Millis timeout{0};              // of every exchange; 0 = the transport's
  SparseAutoRule auto_rule{};     // sgd's `auto`: the network it plans for
  std::string save;               // after every epoch, by rank 0 (atomic)
  nlohmann::json save_meta;       // stored with it (the run's flags), "epoch" added
};

struct LinearScore {
  double loss = 0, accuracy = 0, auc = 0.5;
  std::size_t rows = 0;
};

// The model's mean loss, accuracy (margin > 0 predicts +1) and exact AUC
// over every rank's rows; the same on every rank. AUC gathers every margin
// (8 bytes a row over the wire).
LinearScore evaluate_linear(Transport& t, const LinearModel& m, LinearLoss loss, const SparseRows& rows);

// Trains `model` (zeros, or loaded) on every rank's `train` rows; every
// rank's model has train.num_features weights, and every rank must pass the
// same options. `test` (may be empty) is scored after each epoch.
void train_linear(Transport& t, LinearModel& model, const SparseRows& train, const SparseRows& test,
                  const LinearTrainOptions& o, TrainerSink& sink);

}  // namespace sparq
