#include "sparq/transport/sim_transport.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "sparq/transport/forwarded_state.h"

namespace sparq {

namespace {
constexpr std::size_t kHeader = sizeof(double);  // the message's arrival time
}  // namespace

// The inner request plus what its completion does to the virtual clock.
struct SimState : ForwardedState {
  SimTransport* sim = nullptr;
};

struct SimSendState final : SimState {
  std::vector<std::byte> packed;  // header + payload, alive until sent
  double done_at = 0;             // when the last byte left this rank's link
  std::size_t n = 0;

  void apply() override { sim->clock_ = std::max(sim->clock_, done_at); }
  std::size_t bytes() const override { return n; }
};

struct SimRecvState final : SimState {
  MutBytes user;                   // fixed-size receives land here
  bool any_size = false;
  std::vector<std::byte> landing;  // header + payload
  std::vector<std::byte> message;  // any-size payload
  std::size_t n = 0;

  void apply() override {
    std::vector<std::byte> got = any_size ? inner.take_message() : std::move(landing);
    SPARQ_CHECK_AS(WireError, got.size() >= kHeader, "simulated message of {} bytes has no timing header",
                   got.size());
    double arrival = 0;
    std::memcpy(&arrival, got.data(), kHeader);
    SPARQ_CHECK_AS(WireError, std::isfinite(arrival) && arrival >= 0, "simulated message with arrival time {}",
                   arrival);
    n = got.size() - kHeader;
    if (any_size) {
      message.assign(got.begin() + kHeader, got.end());
    } else if (n) {
      std::memcpy(user.data(), got.data() + kHeader, n);  // sizes matched by the inner receive
    }
    sim->on_receive(arrival, n);
  }
  std::size_t bytes() const override { return n; }
  std::vector<std::byte> take_message() override {
    SPARQ_CHECK(any_size, "take_message() on a fixed-size receive");
    return std::move(message);
  }
};

SimTransport::SimTransport(Transport& inner, NetModel net)
    : inner_(inner), net_(net), name_(fmt::format("sim({})+{}", net.describe(), inner.name())) {
  init_counters(inner.size());
}

void SimTransport::advance(double seconds) {
  SPARQ_CHECK(seconds >= 0, "advance({}) would move the clock backwards", seconds);
  clock_ += seconds;
}

void SimTransport::on_receive(double arrival, std::size_t bytes) {
  const double finish = std::max(arrival, rx_free_ + bytes * net_.beta_s_per_b);
  rx_free_ = finish;
  clock_ = std::max(clock_, finish);
}

std::unique_ptr<RequestState> SimTransport::do_isend(int peer, int tag, Bytes data) {
  const double depart = std::max(clock_, tx_free_);
  const double wire = data.size() * net_.beta_s_per_b;
  tx_free_ = depart + wire;
  const double arrival = depart + net_.alpha_s + wire;
  auto s = std::make_unique<SimSendState>();
  s->sim = this;
  s->n = data.size();
  s->done_at = depart + wire;
  s->packed.resize(kHeader + data.size());
  std::memcpy(s->packed.data(), &arrival, kHeader);
  if (!data.empty()) std::memcpy(s->packed.data() + kHeader, data.data(), data.size());
  s->inner = inner_.isend(peer, tag, s->packed);
  return s;
}

std::unique_ptr<RequestState> SimTransport::do_irecv(int peer, int tag, MutBytes buf) {
  auto s = std::make_unique<SimRecvState>();
  s->sim = this;
  s->user = buf;
  s->any_size = false;
  s->landing.resize(kHeader + buf.size());
  s->inner = inner_.irecv(peer, tag, s->landing);
  return s;
}

std::unique_ptr<RequestState> SimTransport::do_irecv_message(int peer, int tag) {
  auto s = std::make_unique<SimRecvState>();
  s->sim = this;
  s->any_size = true;
  s->inner = inner_.irecv_message(peer, tag);
  return s;
}

}  // namespace sparq
