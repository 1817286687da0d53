#pragma once
// The alpha-beta network model of the virtual clock: a message of b bytes
// costs alpha + b * beta seconds (SparCML section 5.3, Hockney's model).
#include <string>
#include <string_view>

namespace sparq {

struct NetModel {
  double alpha_s = 0;        // per-message latency, seconds
  double beta_s_per_b = 0;   // seconds per byte (1 / bandwidth)
  double message_time(double bytes) const { return alpha_s + bytes * beta_s_per_b; }
  std::string describe() const;  // "10gbit,20us"
};

// "10gbit,20us", "1GBps,1ms", "100mbit,500ns": bandwidth (bit/s with
// kbit/mbit/gbit, or byte/s with KBps/MBps/GBps), then latency (ns, us, ms, s).
// Throws InputError.
NetModel parse_net_model(std::string_view spec);

}  // namespace sparq
