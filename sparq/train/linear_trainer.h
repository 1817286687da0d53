#pragma once
// Data-parallel training of linear models on naturally sparse data (SparCML's
// MPI-OPT, Renggli et al., SC'19, section 8.2): each rank holds its shard of
// the rows and a full copy of the model. Both algorithms minimise
//   F(w) = (1/n) sum_i loss(y_i, w . x_i) + l2/2 |w|^2   (n: every rank's rows)
// and every rank ends each step with the same model.
//
//  - sgd: every step each rank computes the loss gradient of `batch` of its
//    rows (sparse: the features those rows touch), the ranks sum them with a
//    sparse allreduce (or, for comparison, densified through a dense
//    allreduce), and every rank applies the same update to the features the
//    sum touches, g_j = sum_j / (P batch) + l2 w_j:
//      adagrad (default): w_j -= lr_t g_j / sqrt(G_j), G_j += g_j^2 (Duchi et
//        al. 2011: a step per feature, large for rare ones);
//      plain: w <- (1 - lr_t l2) w - lr_t sum / (P batch) (every weight decays);
//    lr_t = lr / (1 + lr_decay e), e the epochs done (fractional).
//  - scd: block coordinate descent on the logistic loss (Newton steps with a
//    line search, after Tseng and Yun's block coordinate gradient descent;
//    sparq's, not SparCML's, see docs/model.md). Each iteration every rank
//    takes the same block of `coords` features (the next of a permutation of
//    the features some rank holds, drawn from the seed), sums the block's
//    gradient and curvature over its rows, and a sparse allreduce adds them
//    (or a dense allreduce, for comparison). Every rank then computes the
//    same direction, each feature's Newton step on F (capped), and the same
//    step alpha: the largest of 1, 1/2, 1/4, ... that decreases F by at
//    least 1 % of alpha times the directional derivative (Armijo), each
//    rank's loss change at four alphas summed by one 32-byte allreduce. So
//    F decreases every iteration on any data, at any P, and the model does
//    not depend on P (up to the order of float sums).
//  - newton (the default for the logistic loss): truncated Newton. An epoch
//    is one step: the gradient over every rank's rows (a sparse allreduce),
//    conjugate gradients on the Hessian until the residual is 0.1 of the
//    gradient (each product one pass over the rows and one sparse
//    allreduce), then the same line search.
//
// Per epoch rank 0 prints a line: the objective F, the training loss and
// accuracy of the epoch's final model, the test loss, accuracy and AUC over
// every rank's test rows, the time split into compute, communication (the
// exchange as its fastest rank saw it) and waiting (this rank's exchange time
// beyond that: load imbalance), and the bytes this rank sent against what
// the dense exchange sends. On a virtual clock (--net) the times are modelled.
// Training stops after `epochs`, or earlier once an epoch changes F by less
// than `tol` of its value (liblinear stops on a tolerance too, its -e), and
// says which.
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

enum class LinearAlgo { Sgd, Scd, Newton };
LinearAlgo parse_linear_algo(std::string_view s);  // "sgd" | "scd" | "newton"
std::string_view linear_algo_name(LinearAlgo a);
enum class SgdStep { Adagrad, Plain };
SgdStep parse_sgd_step(std::string_view s);  // "adagrad" | "plain"

// How the ranks sum their contributions (sgd: gradients; scd: a block's
// gradient and curvature; newton: the gradient and each Hessian product): a
// sparse allreduce algorithm, `auto` choosing by the alpha-beta estimate
// (newton: the owner exchange), a dense allreduce of the densified sums by
// `dense_algo`, or newton's owner exchange (sparq/coll/owner_exchange.h).
struct LinearExchange {
  bool owners = false;
  bool dense = false;
  SparseAlgo sparse = SparseAlgo::Auto;
  AllreduceAlgo dense_algo = AllreduceAlgo::Auto;
};
// "auto", "owner-alltoall", a sparse allreduce algorithm's name, "dense", "dense:ring",
// "dense:rabenseifner", "dense:recursive-doubling", "dense:native".
LinearExchange parse_linear_exchange(std::string_view s);
std::string linear_exchange_name(const LinearExchange& x);

struct LinearTrainOptions {
  LinearLoss loss = LinearLoss::Logistic;
  LinearAlgo algo = LinearAlgo::Sgd;
  LinearExchange exchange{};
  SgdStep sgd_step = SgdStep::Adagrad;
  std::size_t batch = 0;     // sgd: rows per rank and step (0: auto, at least 200 steps an epoch, at most 1000)
  std::size_t coords = 0;    // scd: features per iteration, a block over every rank (0: auto, about two a row)
  double lr = 0.5;           // sgd's step
  double lr_decay = 0;
  double l2 = 0;             // on the mean loss: objective = mean loss + l2/2 |w|^2
  std::size_t epochs = 1;    // at most
  double tol = 0;            // stop once an epoch changes F by less than tol F (0: run every epoch)
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

// How training ended: epochs run, the last objective and its last change
// (relative; NaN after one epoch), and whether it met `tol`.
struct LinearTrainResult {
  std::size_t epochs = 0;
  double objective = 0, change = 0;
  bool converged = false;
};

// Trains `model` (zeros, or loaded) on every rank's `train` rows; every
// rank's model has train.num_features weights, and every rank must pass the
// same options. `test` (may be empty) is scored after each epoch.
LinearTrainResult train_linear(Transport& t, LinearModel& model, const SparseRows& train, const SparseRows& test,
                  const LinearTrainOptions& o, TrainerSink& sink);

}  // namespace sparq
