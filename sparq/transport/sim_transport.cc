#include "sparq/transport/sim_transport.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "sparq/core/error.h"
#include "sparq/core/kernel_costs.h"
#include "sparq/transport/forwarded_state.h"

namespace sparq {

namespace {
constexpr std::size_t kHeader = sizeof(double);  // the message's arrival time

// What reading the thread's CPU clock costs in thread CPU time: between two
// readings that mark a stretch of work lies one reading's cost, which is the
// emulation's (a syscall), not the work's. The smallest of a
// few runs' means, measured once.
double probe_cost() {
  static const double cost = [] {
    double best = 1;
    for (int run = 0; run < 5; ++run) {
      constexpr int n = 200;
      const double a = thread_cpu_seconds();
      for (int i = 0; i < n; ++i) thread_cpu_seconds();
      best = std::min(best, (thread_cpu_seconds() - a) / (n + 1));
    }
    return best;
  }();
  return cost;
}
}  // namespace

// The inner request plus what its completion does to the virtual clock. The
// CPU a thread burns while it waits or polls is not computation.
struct SimState : ForwardedState {
  SimTransport* sim = nullptr;

  bool test() override {
    sim->pause_cpu();
    const bool done = ForwardedState::test();
    if (done) sim->resume_cpu();  // else the thread is polling: it stays paused
    return done;
  }
  bool wait_until(Clock::time_point deadline) override {
    sim->pause_cpu();
    const bool done = ForwardedState::wait_until(deadline);
    sim->resume_cpu();
    return done;
  }
};

struct SimSendState final : SimState {
  std::vector<std::byte> packed;  // header + payload, alive until sent
  double done_at = 0;             // when the last byte left this rank's link
  std::size_t n = 0;

  void apply() override {
    std::vector<std::byte>().swap(packed);  // freed here, inside the transport: not charged
    sim->on_sent(done_at);
  }
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
    std::vector<std::byte>().swap(got);  // freed here, inside the transport: not charged
    sim->on_receive(arrival, n);
  }
  std::size_t bytes() const override { return n; }
  std::vector<std::byte> take_message() override {
    SPARQ_CHECK(any_size, "take_message() on a fixed-size receive");
    return std::move(message);
  }
};

SimTransport::SimTransport(Transport& inner, NetModel net, double cpu_scale, int host_cores, SharedCores* shared)
    : inner_(inner),
      net_(net),
      cpu_scale_(cpu_scale),
      name_(fmt::format("sim({}{}{}{})+{}", net.describe(),
                        cpu_scale == 0 ? "" : cpu_scale == 1 ? ", cpu" : fmt::format(", cpu x{}", cpu_scale),
                        host_cores > 0 ? fmt::format(", {} core{}", host_cores, host_cores > 1 ? "s" : "") : "",
                        shared ? ", shared cores" : "", inner.name())),
      shared_(shared) {
  SPARQ_CHECK_AS(InputError, !shared || host_cores == 0,
                 "a rank computes on cores of its own host or on cores all ranks share, not both");
  SPARQ_CHECK_AS(InputError, std::isfinite(cpu_scale) && cpu_scale >= 0, "CPU time scale must be >= 0, got {}",
                 cpu_scale);
  SPARQ_CHECK_AS(InputError, host_cores >= 0, "a host's cores must be >= 0 (0: a core per thread), got {}",
                 host_cores);
  if (host_cores > 0) cores_.emplace(host_cores);
  init_counters(inner.size());
}

double SimTransport::compute(double start, double work) const {
  if (!limited_cores() || work <= 0) return start + work;
  // No thread of this rank places work before the earliest clock.
  double earliest = start;
  for (const auto& [id, l] : lines_) earliest = std::min(earliest, l.clock);
  if (shared_) return shared_->run(rank(), start, work, earliest);
  const double end = cores_->run(start, work);
  cores_->forget_before(earliest);
  return end;
}

SimTransport::Timeline& SimTransport::line(bool charge) const {
  const auto [it, fresh] = lines_.try_emplace(std::this_thread::get_id());
  Timeline& l = it->second;
  if (cpu_scale_ > 0 && (charge || fresh)) {
    const double cpu = charged_cpu_seconds();
    // A new thread's earlier work is not this rank's; a paused one was polling.
    if (!fresh && !l.paused) l.clock = compute(l.clock, cpu_scale_ * std::max(0.0, cpu - l.cpu_mark - probe_cost()));
    l.cpu_mark = cpu;
    l.paused = false;
  }
  return l;
}

void SimTransport::virtual_idle() { pause_cpu(); }

void SimTransport::virtual_collective_end() {
  if (net_.coll_latency_s == 0) return;  // no lock or CPU-clock read a job where the model has no such cost
  std::lock_guard lk(mu_);
  line().clock += net_.coll_latency_s;  // a wait, not work: no core is busy for it
}

void SimTransport::charge_cpu() const {
  std::lock_guard lk(mu_);
  line();
}

void SimTransport::pause_cpu() const {
  std::lock_guard lk(mu_);
  line().paused = true;
}

void SimTransport::resume_cpu() const {
  if (cpu_scale_ == 0) return;
  std::lock_guard lk(mu_);
  Timeline& l = lines_[std::this_thread::get_id()];
  l.cpu_mark = charged_cpu_seconds();
  l.paused = false;
}

double SimTransport::now() const {
  std::lock_guard lk(mu_);
  return line().clock;
}

void SimTransport::advance(double seconds) {
  SPARQ_CHECK(seconds >= 0, "advance({}) would move the clock backwards", seconds);
  std::lock_guard lk(mu_);
  Timeline& l = line();
  l.clock = compute(l.clock, seconds);
}

void SimTransport::begin_parallel() { charge_cpu(); }

void SimTransport::end_parallel(std::span<const double> part_cpu_s) {
  if (cpu_scale_ == 0) return;
  std::lock_guard lk(mu_);
  Timeline& l = lines_[std::this_thread::get_id()];
  const double start = l.clock;
  for (double cpu : part_cpu_s) l.clock = std::max(l.clock, compute(start, cpu_scale_ * std::max(0.0, cpu - probe_cost())));
  // The workers (every part but the caller's) then spin for the next job,
  // each on a core: where the host has cores to spare that costs nothing,
  // where it has fewer than threads it delays the rank's other work.
  if (limited_cores())
    for (std::size_t w = 1; w < part_cpu_s.size(); ++w) compute(l.clock, kWorkerSpinSeconds);
  l.cpu_mark = charged_cpu_seconds();  // the parts' CPU is charged above, not again
}

void SimTransport::virtual_wait_until(double t) {
  std::lock_guard lk(mu_);
  Timeline& l = line();
  l.clock = std::max(l.clock, t);
}

void SimTransport::on_receive(double arrival, std::size_t bytes) {
  std::lock_guard lk(mu_);
  const double finish = std::max(arrival, rx_free_ + bytes * net_.beta_s_per_b);
  rx_free_ = finish;
  Timeline& l = line(false);  // inside a wait
  l.clock = compute(std::max(l.clock, finish), stack_cpu(bytes));
}

double SimTransport::stack_cpu(std::size_t bytes) const {
  // Measured CPU time, like the threads': scaled like theirs (unscaled when
  // the computation is not modelled).
  return (net_.cpu_s_per_msg + net_.cpu_s_per_b * static_cast<double>(bytes)) * (cpu_scale_ > 0 ? cpu_scale_ : 1);
}

void SimTransport::on_sent(double done_at) {
  std::lock_guard lk(mu_);
  Timeline& l = line(false);  // inside a wait
  l.clock = std::max(l.clock, done_at);
}

std::unique_ptr<RequestState> SimTransport::do_isend(int peer, int tag, Bytes data) {
  const double wire = data.size() * net_.beta_s_per_b;
  double depart = 0;
  {
    std::lock_guard lk(mu_);
    Timeline& l = line();
    l.clock = compute(l.clock, stack_cpu(data.size()));  // the network stack takes the bytes
    depart = std::max(l.clock, tx_free_);
    tx_free_ = depart + wire;
  }
  const double arrival = depart + net_.alpha_s + wire;
  auto s = std::make_unique<SimSendState>();
  s->sim = this;
  s->n = data.size();
  s->done_at = depart + wire;
  s->packed.resize(kHeader + data.size());
  std::memcpy(s->packed.data(), &arrival, kHeader);
  if (!data.empty()) std::memcpy(s->packed.data() + kHeader, data.data(), data.size());
  s->inner = inner_.isend(peer, tag, s->packed);
  resume_cpu();  // packing and queueing are the emulation's: stack_cpu() stands for them
  return s;
}

std::unique_ptr<RequestState> SimTransport::do_irecv(int peer, int tag, MutBytes buf) {
  charge_cpu();
  auto s = std::make_unique<SimRecvState>();
  s->sim = this;
  s->user = buf;
  s->any_size = false;
  s->landing.resize(kHeader + buf.size());
  s->inner = inner_.irecv(peer, tag, s->landing);
  resume_cpu();
  return s;
}

std::unique_ptr<RequestState> SimTransport::do_irecv_message(int peer, int tag) {
  charge_cpu();
  auto s = std::make_unique<SimRecvState>();
  s->sim = this;
  s->any_size = true;
  s->inner = inner_.irecv_message(peer, tag);
  resume_cpu();
  return s;
}

}  // namespace sparq
