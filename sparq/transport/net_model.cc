#include "sparq/transport/net_model.h"

#include <charconv>
#include <iterator>
#include <vector>

#include <fmt/format.h>

#include "sparq/core/error.h"

namespace sparq {

namespace {

// Splits "12.5unit" into 12.5 and "unit".
std::pair<double, std::string_view> number_unit(std::string_view s, std::string_view spec) {
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  SPARQ_CHECK_AS(InputError, ec == std::errc() && p != s.data() && v >= 0,
                 "bad --net '{}': '{}' does not start with a non-negative number", spec, s);
  return {v, std::string_view(p, s.data() + s.size() - p)};
}

template <std::size_t N>
double scale(std::string_view unit, const std::pair<std::string_view, double> (&table)[N], std::string_view spec,
             std::string_view what) {
  for (const auto& [name, mult] : table)
    if (unit == name) return mult;
  SPARQ_THROW(InputError, "bad --net '{}': unknown {} unit '{}'", spec, what, unit);
}

// The optional fields after the latency, in their order.
constexpr std::pair<double NetModel::*, std::string_view> kOptionalFields[] = {
    {&NetModel::cpu_s_per_b, "CPU time per byte"},
    {&NetModel::cpu_s_per_msg, "CPU time per message"},
    {&NetModel::coll_latency_s, "latency per collective"}};

}  // namespace

NetModel parse_net_model(std::string_view spec) {
  std::vector<std::string_view> fields;
  for (std::size_t start = 0;;) {
    const std::size_t comma = spec.find(',', start);
    fields.push_back(spec.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  SPARQ_CHECK_AS(InputError, fields.size() >= 2 && fields.size() <= 5,
                 "bad --net '{}': expected BANDWIDTH,LATENCY[,CPU_PER_BYTE[,CPU_PER_MESSAGE[,LATENCY_PER_COLLECTIVE]]] "
                 "such as 10gbit,20us",
                 spec);
  static constexpr std::pair<std::string_view, double> bw_units[] = {
      {"bit", 1.0 / 8},  {"kbit", 1e3 / 8}, {"mbit", 1e6 / 8}, {"gbit", 1e9 / 8}, {"Bps", 1.0},
      {"KBps", 1e3},     {"MBps", 1e6},     {"GBps", 1e9}};
  static constexpr std::pair<std::string_view, double> time_units[] = {
      {"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1.0}};
  const auto [bw, bu] = number_unit(fields[0], spec);
  const auto [lat, lu] = number_unit(fields[1], spec);
  const double bytes_per_s = bw * scale(bu, bw_units, spec, "bandwidth");
  SPARQ_CHECK_AS(InputError, bytes_per_s > 0, "bad --net '{}': bandwidth must be positive", spec);
  NetModel m{lat * scale(lu, time_units, spec, "latency"), 1.0 / bytes_per_s};
  for (std::size_t i = 2; i < fields.size(); ++i) {
    const auto [cpu, cu] = number_unit(fields[i], spec);
    const auto& [field, what] = kOptionalFields[i - 2];
    m.*field = cpu * scale(cu, time_units, spec, what);
  }
  return m;
}

std::string NetModel::describe() const {
  // The optional fields up to the last one set: per byte in ns, the others in us.
  std::size_t shown = 0;
  for (std::size_t i = 0; i < std::size(kOptionalFields); ++i)
    if (this->*kOptionalFields[i].first > 0) shown = i + 1;
  std::string optional;
  for (std::size_t i = 0; i < shown; ++i) {
    const double v = this->*kOptionalFields[i].first;
    optional += i == 0 ? fmt::format(",{:g}ns", v * 1e9) : fmt::format(",{:g}us", v * 1e6);
  }
  return fmt::format("{:g}gbit,{:g}us{}", 8.0 / beta_s_per_b / 1e9, alpha_s * 1e6, optional);
}

}  // namespace sparq
