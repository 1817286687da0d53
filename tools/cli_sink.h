#pragma once
// The CLI's trainer sink: progress lines to stdout, metrics events to the
// --metrics file (JSON lines), opened by the rank that writes it ("" for
// the others: they write none).
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <string>

#include "sparq/core/error.h"
#include "sparq/train/sink.h"

namespace sparq::cli {

class CliSink final : public TrainerSink {
 public:
  explicit CliSink(const std::string& metrics) {
    if (metrics.empty()) return;
    metrics_.open(metrics);
    SPARQ_CHECK_AS(InputError, metrics_.good(), "cannot create '{}'", metrics);
  }
  void line(const std::string& text) override { std::fputs(text.c_str(), stdout); }
  void event(const nlohmann::json& e) override {
    if (metrics_.is_open()) metrics_ << e.dump() << "\n" << std::flush;
  }

 private:
  std::ofstream metrics_;
};

}  // namespace sparq::cli
