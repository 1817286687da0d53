#include "sparq/data/criteo.h"

#include <charconv>

#include <fmt/format.h>

namespace sparq {

namespace {

bool parse_int(std::string_view f, std::int64_t& v, std::string& why, std::size_t field) {
  if (f.empty()) {
    v = 0;
    return true;
  }
  const auto r = std::from_chars(f.data(), f.data() + f.size(), v);
  if (r.ec == std::errc::result_out_of_range) {
    why = fmt::format("field {} (I{}): integer '{}' overflows 64 bits", field + 1, field, f);
    return false;
  }
  if (r.ec != std::errc() || r.ptr != f.data() + f.size()) {
    why = fmt::format("field {} (I{}): '{}' is not an integer", field + 1, field, f);
    return false;
  }
  return true;
}

bool parse_hex(std::string_view f, std::uint32_t& v, std::string& why, std::size_t field, std::size_t cat) {
  if (f.empty()) {
    v = 0;
    return true;
  }
  if (f.size() > 8) {
    why = fmt::format("field {} (C{}): '{}' is longer than 8 hex digits (32 bits)", field + 1, cat, f);
    return false;
  }
  const auto r = std::from_chars(f.data(), f.data() + f.size(), v, 16);
  if (r.ec != std::errc() || r.ptr != f.data() + f.size()) {
    why = fmt::format("field {} (C{}): '{}' is not a hex value", field + 1, cat, f);
    return false;
  }
  return true;
}

}  // namespace

bool parse_criteo_line(std::string_view line, CriteoRecord& out, std::string& why) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  std::size_t field = 0, pos = 0;
  while (true) {
    const std::size_t tab = line.find('\t', pos);
    const std::string_view f = line.substr(pos, tab == std::string_view::npos ? std::string_view::npos : tab - pos);
    if (field >= kCriteoFields) {
      why = fmt::format("more than {} tab-separated fields", kCriteoFields);
      return false;
    }
    if (field == 0) {
      if (f == "0" || f == "1") {
        out.label = f[0] == '1' ? 1.0f : 0.0f;
      } else {
        why = fmt::format("field 1 (label): '{}' is not 0 or 1", f);
        return false;
      }
    } else if (field <= kCriteoDense) {
      std::int64_t v;
      if (!parse_int(f, v, why, field)) return false;
      out.dense[field - 1] = criteo_dense_transform(v);
    } else {
      if (!parse_hex(f, out.sparse[field - 1 - kCriteoDense], why, field, field - kCriteoDense)) return false;
    }
    ++field;
    if (tab == std::string_view::npos) break;
    pos = tab + 1;
  }
  if (field != kCriteoFields) {
    why = fmt::format("{} tab-separated fields, expected {}", field, kCriteoFields);
    return false;
  }
  return true;
}

void format_criteo_line(float label, const std::int64_t* ints, const bool* int_present, const std::uint32_t* cats,
                        std::string& out) {
  fmt::format_to(std::back_inserter(out), "{}", label > 0.5f ? 1 : 0);
  for (std::size_t i = 0; i < kCriteoDense; ++i) {
    out.push_back('\t');
    if (int_present[i]) fmt::format_to(std::back_inserter(out), "{}", ints[i]);
  }
  for (std::size_t i = 0; i < kCriteoSparse; ++i) fmt::format_to(std::back_inserter(out), "\t{:08x}", cats[i]);
  out.push_back('\n');
}

}  // namespace sparq
