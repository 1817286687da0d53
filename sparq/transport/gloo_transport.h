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
//  - a message travels as chunks of at most kChunk payload bytes, each one
//    Gloo message of a 16-byte header (tag, message size, chunk length) and
//    the payload. The send copies them out and completes at once, like an MPI
//    eager send; a sender more than 64 chunks ahead of a peer waits for the
//    oldest to be written out (flow control);
//  - per peer, one thread keeps kPosted receives of a chunk posted (Gloo
//    sends data only to a posted receive; posted in advance, it goes out at
//    once) and puts each chunk where it belongs: the first chunk of a message
//    matches it to a posted receive of the right size (its payload then lands
//    in the caller's buffer), to a new buffer when no receive is posted yet
//    (MPI's unexpected queue: the receive copies it later), or to a discarded
//    buffer when the size is wrong (that receive fails with a WireError; the
//    transport stays usable);
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

  // Payload bytes per chunk, and chunk receives posted per peer.
  static constexpr std::size_t kChunk = 256 * 1024;
  static constexpr int kPosted = 4;

  struct Impl;

 protected:
  std::unique_ptr<RequestState> do_isend(int peer, int tag, Bytes data) override;
  std::unique_ptr<RequestState> do_irecv(int peer, int tag, MutBytes buf) override;
  std::unique_ptr<RequestState> do_irecv_message(int peer, int tag) override;

 private:
  std::unique_ptr<RequestState> post_recv(int peer, int tag, MutBytes buf, bool any_size);
  int rank_, size_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sparq
