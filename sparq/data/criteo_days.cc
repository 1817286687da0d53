#include "sparq/data/criteo_days.h"

#include <filesystem>

#include "sparq/core/error.h"
#include "sparq/data/text_file.h"

namespace sparq {

CriteoSet parse_criteo_set(std::string_view s) {
  if (s == "kaggle") return CriteoSet::Kaggle;
  if (s == "terabyte") return CriteoSet::Terabyte;
  SPARQ_THROW(InputError, "--data-set must be kaggle or terabyte, got '{}'", s);
}

std::size_t default_days(CriteoSet s) { return s == CriteoSet::Kaggle ? 7 : 24; }

namespace {
// PREFIX_i or PREFIX_i.gz, exactly one of them.
std::string day_file(const std::string& prefix, std::size_t i) {
  const std::string plain = prefix + "_" + std::to_string(i), gz = plain + ".gz";
  const bool has_plain = std::filesystem::exists(plain), has_gz = std::filesystem::exists(gz);
  SPARQ_CHECK_AS(InputError, has_plain || has_gz, "day {}: neither '{}' nor '{}' exists", i, plain, gz);
  SPARQ_CHECK_AS(InputError, !(has_plain && has_gz), "day {}: both '{}' and '{}' exist; keep one", i, plain, gz);
  return has_gz ? gz : plain;
}
}  // namespace

CriteoSplit plan_criteo_split(CriteoSet set, const std::string& raw_data_file, std::size_t days) {
  SPARQ_CHECK_AS(InputError, days >= 2, "the Criteo split needs at least 2 days (training days and a test day), got {}",
                 days);
  CriteoSplit s;
  s.train_days = days - 1;
  std::size_t last_day = 0;  // lines of the last day
  if (set == CriteoSet::Kaggle) {
    SPARQ_CHECK_AS(InputError, std::filesystem::is_regular_file(raw_data_file), "cannot open '{}': no such file",
                   raw_data_file);
    const std::size_t total = count_lines(raw_data_file);
    const std::size_t per_day = total / days, extras = total % days;
    for (std::size_t d = 0; d + 1 < days; ++d) s.train_end += per_day + (d < extras ? 1 : 0);
    last_day = total - s.train_end;
    s.train_files = s.eval_files = {raw_data_file};
    s.test_begin = s.train_end;
  } else {
    for (std::size_t d = 0; d + 1 < days; ++d) s.train_files.push_back(day_file(raw_data_file, d));
    s.eval_files = {day_file(raw_data_file, days - 1)};
    for (const auto& f : s.train_files) s.train_end += count_lines(f);
    last_day = count_lines(s.eval_files[0]);
  }
  s.test_end = s.test_begin + (last_day + 1) / 2;
  s.val_begin = s.test_end;
  s.val_end = s.test_begin + last_day;
  return s;
}

}  // namespace sparq
