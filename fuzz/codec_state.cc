// GradExchange::load_state(): a rank's codec state as read from a checkpoint
// (residuals, DCT-DP thresholds and schedule, auto's sparse plans). The first
// byte picks the codec the state is loaded into.
#include <cstddef>
#include <cstdint>
#include <span>

#include "sparq/core/error.h"
#include "sparq/train/grad_exchange.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static const char* const kCodecs[] = {"none", "dct:0.9,10", "topk:2/8", "q4+ec", "qsgd:4", "dct:0.5,1+fp8"};
  sparq::compress::ErrorFeedbackStore residuals;
  sparq::GradExchange ex(sparq::parse_dp_codec(kCodecs[data[0] % 6]), residuals);
  try {
    ex.load_state(std::span(reinterpret_cast<const std::byte*>(data + 1), size - 1));
  } catch (const sparq::InputError&) {
  }
  return 0;
}
