#pragma once
// The alpha-beta network model of the virtual clock: a message of b bytes
// costs alpha + b * beta seconds (SparCML section 5.3, Hockney's model).
// Optionally each message and each byte also cost its sender and its
// receiver CPU time (the network stack's work: LogGP's o per message, LogGOPS's
// O per byte), which SimTransport charges like computation; and each
// collective that a rank's communication thread runs ends a fixed latency
// after its last message, with no core busy for it (what a loaded host's
// collective costs beyond its messages: fitted on a cluster by
// scripts/coll-latency-runs, docs/results.md).
#include <string>
#include <string_view>

namespace sparq {

struct NetModel {
  double alpha_s = 0;        // per-message latency, seconds
  double beta_s_per_b = 0;   // seconds per byte (1 / bandwidth)
  double cpu_s_per_b = 0;    // CPU seconds per byte, at each end
  double cpu_s_per_msg = 0;  // CPU seconds per message, at each end
  double coll_latency_s = 0;  // seconds a collective of a communication thread (CommEngine job) ends late
  double message_time(double bytes) const { return alpha_s + bytes * beta_s_per_b; }
  std::string describe() const;  // "10gbit,20us", "1gbit,50us,0.7ns", "1gbit,50us,0.7ns,4us", "...,4us,300us"
};

// "10gbit,20us", "1GBps,1ms", "100mbit,500ns": bandwidth (bit/s with
// kbit/mbit/gbit, or byte/s with KBps/MBps/GBps), then latency (ns, us, ms, s),
// then optionally the CPU time per byte and per message at each end and the
// latency a collective of a communication thread ("1gbit,50us,0.7ns",
// "1gbit,50us,0.7ns,4us", "1gbit,50us,0.7ns,4us,300us"). Throws InputError.
NetModel parse_net_model(std::string_view spec);

}  // namespace sparq
