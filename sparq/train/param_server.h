#pragma once
// Parameter-server training (--dp-mode ps --servers S), the DCT paper's
// production setting: ranks [0, W) are workers, ranks [W, W + S) servers.
// Each server holds a shard of the model: whole dense tensors and whole
// tables, each assigned to one server (largest first, least-loaded server).
//
// A worker's step k: pull the current dense parameters and the table rows
// its share of the batch looks up; forward and backward on its share; push
// the gradients (dense ones through the --dp-codec: none, or DCT-DP's
// thresholded sparse tensors with the worker's error feedback) without
// waiting for an answer. Servers apply every push as it arrives (SGD with
// lr / W, so W pushes of mean gradients make one mean step). A pull for step
// k is answered once every worker still running has pushed at least
// k - max_staleness steps, which bounds how far a worker runs ahead
// (max_staleness 0: every pull sees all pushes of the previous step).
//
// Every message is validated on arrival (WireError); a worker or server that
// stops answering makes its peers fail with TimeoutError naming it.
#include <cstdint>
#include <optional>
#include <vector>

#include "sparq/compress/error_feedback.h"
#include "sparq/model/dlrm.h"
#include "sparq/compress/dct_dp.h"
#include "sparq/train/grad_exchange.h"

namespace sparq {

// Which server holds what, the same on every rank.
struct PsLayout {
  int workers = 0, servers = 0;
  std::vector<int> view_server;   // per dense view (tensor): server index
  std::vector<int> table_server;  // per table: server index
  PsLayout(const Dlrm<float>& model, int workers, int servers);
  int server_rank(int s) const { return workers + s; }
};

struct PsWorkerStats {
  double loss = 0;           // mean loss on this worker's share
  std::size_t samples = 0;
  std::size_t correct = 0;   // predictions that equal the label
  ExchangeStats w_grad;      // dense gradients pushed
  ExchangeStats emb_grad;    // table row gradients pushed
  ExchangeStats pull;        // parameters pulled (bytes received, as counted by the transport)
  double forward_s = 0, backward_s = 0;
  double wait_s = 0;         // blocked on pull answers (includes staleness waits)
};

class PsWorker {
 public:
  // `model` holds every parameter (refreshed by pulls); references outlive this.
  PsWorker(Transport& t, Dlrm<float>& model, const PsLayout& layout, DpCodec codec,
           compress::ErrorFeedbackStore& residuals);
  // Step k on this worker's share (pattern::Partition over workers) of `global`.
  PsWorkerStats step(const Batch& global, std::uint64_t k);
  // Pulls the whole model (every dense tensor and table) into `model`, once
  // every running worker has pushed `steps` steps.
  void fetch_all(std::uint64_t steps);
  // Tells every server that this worker has finished; call once, last.
  void finish();
  // This worker's codec state (error feedback, DCT-DP thresholds), as
  // DataParallel::save_state().
  std::vector<std::byte> save_state() const;
  void load_state(std::span<const std::byte> blob);

 private:
  void pull(std::uint64_t k, PsWorkerStats& st);
  void compute(std::size_t global_size, PsWorkerStats& st);
  void push(std::uint64_t k, PsWorkerStats& st);
  void send(int server, std::vector<std::byte> msg);
  void wait_sends();
  Transport& t_;
  Dlrm<float>& model_;
  const PsLayout& layout_;
  DpCodec codec_;
  compress::ErrorFeedbackStore& residuals_;
  std::optional<compress::DctDp> dct_;
  Batch local_;
  std::vector<std::vector<std::byte>> bufs_;
  std::vector<Request> sends_;
  std::vector<float> dlogits_;
};

struct PsServerStats {
  std::uint64_t pushes = 0, pulls = 0;
  double stale_wait_s = 0;  // summed time pulls waited for the staleness bound
};

class PsServer {
 public:
  // `model` is the full model initialised like the workers'; this server
  // keeps and updates its shard of it. `first_step`: the step the workers
  // start at (a resumed run's), as if every worker had pushed that many.
  PsServer(Transport& t, Dlrm<float>& model, const PsLayout& layout, double lr, std::uint64_t max_staleness,
           std::uint64_t first_step = 0);
  // Serves until every worker has finished. Throws TimeoutError when no
  // worker sends anything for the transport's timeout.
  PsServerStats run();

 private:
  Transport& t_;
  Dlrm<float>& model_;
  const PsLayout& layout_;
  double lr_;
  std::uint64_t max_staleness_, first_step_;
};

}  // namespace sparq
