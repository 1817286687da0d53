#pragma once
// The reference's (facebookresearch/dlrm) train / validation / test split of
// the raw Criteo data sets, as line ranges to stream:
//
//   kaggle    one file (train.txt) cut into 7 days by line count, the first
//             (lines mod 7) days one line longer; days 0-5 train.
//   terabyte  day files PREFIX_0 .. PREFIX_23 (each plain or .gz); days
//             0-22 train.
//
// The last day is halved: its first ceil(n/2) lines are the test set, the
// rest the validation set. `days` other than 7 / 24 is sparq's extension
// for smaller data sets (e.g. `sparq gen-data --format terabyte --days 3`).
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace sparq {

enum class CriteoSet { Kaggle, Terabyte };
CriteoSet parse_criteo_set(std::string_view s);  // "kaggle" | "terabyte"; InputError otherwise
std::size_t default_days(CriteoSet s);           // 7 | 24

struct CriteoSplit {
  std::vector<std::string> train_files;  // lines [train_begin, train_end) across them
  std::size_t train_begin = 0, train_end = 0;
  std::vector<std::string> eval_files;   // the last day; test and validation ranges across them
  std::size_t test_begin = 0, test_end = 0, val_begin = 0, val_end = 0;
  std::size_t train_days = 0;
};

// Finds the files (a missing day file, or one present both plain and as .gz,
// is an InputError naming it) and counts lines (one pass; gzip files are
// inflated to count).
CriteoSplit plan_criteo_split(CriteoSet set, const std::string& raw_data_file, std::size_t days);

}  // namespace sparq
