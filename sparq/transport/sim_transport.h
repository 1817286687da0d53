#pragma once
// A transport decorator with a virtual clock per rank, for predicting the
// cost of collectives on networks and rank counts this machine does not have
// (hundreds of LocalTransport ranks in one process).
//
// Model (alpha-beta, full-duplex links, one per rank):
//  - a send of b bytes posted at clock t leaves when the rank's outgoing link
//    is free: depart = max(t, tx_free); the link is then busy for b*beta;
//  - it arrives at depart + alpha + b*beta, but not before the receiver's
//    incoming link has finished the previous message: finish =
//    max(arrival, rx_free + b*beta) (so incast serialises);
//  - completing a receive moves the receiver's clock to max(clock, finish);
//    completing a send moves the sender's to max(clock, depart + b*beta).
// Computation takes no simulated time unless advance() says so. Each message
// carries its arrival time in an 8-byte header, which the counters of this
// transport do not count (they count what the algorithm sent).
#include <optional>

#include "sparq/transport/net_model.h"
#include "sparq/transport/transport.h"

namespace sparq {

class SimTransport final : public Transport {
 public:
  SimTransport(Transport& inner, NetModel net);
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string_view name() const override { return name_; }
  std::optional<double> virtual_time() const override { return clock_; }

  double now() const { return clock_; }
  // Adds modelled computation time to this rank's clock.
  void advance(double seconds);

 protected:
  std::unique_ptr<RequestState> do_isend(int peer, int tag, Bytes data) override;
  std::unique_ptr<RequestState> do_irecv(int peer, int tag, MutBytes buf) override;
  std::unique_ptr<RequestState> do_irecv_message(int peer, int tag) override;

 private:
  friend struct SimRecvState;
  friend struct SimSendState;
  friend struct SimState;
  // Applies a received message's timing; returns nothing, moves the clock.
  void on_receive(double arrival, std::size_t bytes);
  Transport& inner_;
  NetModel net_;
  std::string name_;
  double clock_ = 0, tx_free_ = 0, rx_free_ = 0;
};

}  // namespace sparq
