#pragma once
// N ranks as threads of one process. Used by the fast tests and by the N-node
// emulator. Sends are eager: the payload is copied straight into a posted
// receive, or into the receiver's queue of unexpected messages if none is
// posted yet, so a send completes at once and never deadlocks.
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "sparq/transport/transport.h"

namespace sparq {

class LocalWorld;

class LocalTransport final : public Transport {
 public:
  LocalTransport(LocalWorld* world, int rank, int size);
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view name() const override { return "local"; }

 protected:
  std::unique_ptr<RequestState> do_isend(int peer, int tag, Bytes data) override;
  std::unique_ptr<RequestState> do_irecv(int peer, int tag, MutBytes buf) override;
  std::unique_ptr<RequestState> do_irecv_message(int peer, int tag) override;

 private:
  std::unique_ptr<RequestState> post_recv(int peer, int tag, MutBytes buf, bool any_size);
  LocalWorld* world_;
  int rank_, size_;
};

// The shared state of N local ranks: one mailbox per rank.
class LocalWorld {
 public:
  explicit LocalWorld(int nranks);
  ~LocalWorld();
  int size() const { return static_cast<int>(ranks_.size()); }
  LocalTransport& rank(int r) { return *ranks_.at(r); }

  // Wakes every waiting rank with AbortedError(reason); later waits fail too.
  void abort(const std::string& reason);

  struct RecvSlot;  // a posted receive
  struct Mailbox;

 private:
  friend class LocalTransport;
  friend struct LocalRecvState;
  std::vector<std::unique_ptr<Mailbox>> boxes_;
  std::vector<std::unique_ptr<LocalTransport>> ranks_;
  std::atomic<bool> aborted_{false};
  std::string abort_reason_;  // written once, before aborted_ is set
  std::mutex abort_mu_;
};

// Runs fn(transport) on `nranks` threads over one LocalWorld. When a rank
// throws, the others are woken with AbortedError; after all joined, the first
// original failure is rethrown (prefixed with its rank), never a secondary
// AbortedError. `timeout` sets every rank's wait timeout.
void run_local(int nranks, const std::function<void(Transport&)>& fn,
               Millis timeout = Transport::kDefaultTimeout);

}  // namespace sparq
