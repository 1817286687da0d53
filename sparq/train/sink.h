#pragma once
// Where the trainer's output goes: progress lines (what `sparq train`
// prints) and metrics events (its --metrics JSON lines). Only rank 0 writes
// to it; in-process ranks share one sink.
#include <nlohmann/json.hpp>

#include <string>

namespace sparq {

class TrainerSink {
 public:
  virtual ~TrainerSink() = default;
  virtual void line(const std::string& text) = 0;     // one or more whole lines, '\n' included
  virtual void event(const nlohmann::json& e) = 0;  // one metrics event
};

}  // namespace sparq
