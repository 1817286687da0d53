#pragma once
// Ranks connected by Gloo's TCP transport: the transport of the PyTorch
// bridge, where a job is launched by torchrun (or any torch.distributed
// launcher) and there is no MPI. PyTorch itself ships Gloo, so this adds no
// socket code of sparq's own; the ranks meet through a key-value store (the
// job's torch.distributed store, or Gloo's in-process HashStore in tests).
//
// Gloo delivers a message only into a posted receive of at least its size
// (a larger one aborts the process), and can neither test a pending
// operation nor tell a receiver the size of what arrived. sparq's semantics
// (exact sizes checked, receives of unknown size, sends that complete
// without their receive posted yet) are built on it like this:
//  - every message starts with a 16-byte header (tag, size) on the control
//    slot. A payload of up to kInline bytes travels in the same Gloo message
//    (the send copies it and completes at once, like MPI's eager sends); a
//    larger one follows on the data slot, from the caller's buffer;
//  - per peer, one thread keeps two control receives posted and handles each
//    header as it lands: the payload goes into the matching posted receive
//    when its size is right, into a new buffer when none is posted yet (MPI's
//    unexpected queue: the receive copies it later), into a discarded buffer
//    when the size is wrong (the receive then fails with a WireError and the
//    transport stays usable). Payloads are thus always received, so no send
//    waits for its receive to be posted;
//  - per peer, one thread waits for Gloo to finish the sends of large
//    payloads (Gloo can only block on one operation, it cannot test one);
//  - the counters count payload bytes, like the other transports (whose
//    envelopes are not counted either);
//  - a corrupt header or a broken connection fails every later wait of the
//    transport with an error naming the peer.
#include <memory>
#include <string>

#include "sparq/transport/transport.h"

namespace gloo::rendezvous {
class Store;
}

namespace sparq {

// Where this rank listens: an interface name (like GLOO_SOCKET_IFNAME) or a
// host name or address; neither given means the address of the host's name.
struct GlooAddress {
  std::string iface;
  std::string hostname;
};

class GlooTransport final : public Transport {
 public:
  // Connects `size` ranks through `store`; `timeout` bounds the connection
  // and is every wait's default.
  GlooTransport(gloo::rendezvous::Store& store, int rank, int size, const GlooAddress& address,
                Millis timeout = kDefaultTimeout);
  ~GlooTransport() override;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view name() const override { return "gloo"; }

  // Payloads up to this size travel inside their header's message.
  static constexpr std::size_t kInline = 256 * 1024;

  struct Impl;

 protected:
  std::unique_ptr<RequestState> do_isend(int peer, int tag, Bytes data) override;
  std::unique_ptr<RequestState> do_irecv(int peer, int tag, MutBytes buf) override;
  std::unique_ptr<RequestState> do_irecv_message(int peer, int tag) override;

 private:
  int rank_, size_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sparq
