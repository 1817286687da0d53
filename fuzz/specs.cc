// The CLI's spec parsers (flag values): codecs, collectives, byte sizes,
// dash lists. The first byte picks the parser, the rest is the flag's text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "sparq/coll/allreduce.h"
#include "sparq/coll/alltoall.h"
#include "sparq/coll/codec.h"
#include "sparq/coll/quantized.h"
#include "sparq/coll/sparse_allreduce.h"
#include "sparq/coll/reduce_op.h"
#include "sparq/core/dtype.h"
#include "sparq/core/error.h"
#include "sparq/core/units.h"
#include "sparq/data/criteo_days.h"
#include "sparq/model/dlrm.h"
#include "sparq/model/optimizer.h"
#include "sparq/train/data_parallel.h"
#include "sparq/train/grad_exchange.h"
#include "sparq/train/pipeline.h"
#include "sparq/transport/net_model.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sparq;
  if (size == 0) return 0;
  const std::string_view s(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    switch (data[0] % 13) {
      case 0: {
        // "--dp-codec X" or, after a '|', "--dp-allreduce Y" for it.
        const auto bar = s.find('|');
        parse_dp_codec(s.substr(0, bar), bar == s.npos ? "auto" : s.substr(bar + 1));
        break;
      }
      case 1: parse_mp_codec(s); break;
      case 2: {
        const Codec c = parse_codec(s);
        (void)c.name();
        (void)c.bytes(100);
        break;
      }
      case 3: parse_bytes(s); break;
      case 4: parse_byte_range(s); break;
      case 5: parse_dash_list(std::string(s)); break;
      case 6: parse_allreduce_algo(s); break;
      case 7: parse_alltoall_algo(s); break;
      case 8: parse_sparse_algo(s); break;
      case 9: parse_quant_algo(s); break;
      case 10: parse_emb_placement(s); break;
      case 11: parse_net_model(s); break;
      default:
        parse_embedding_optim(s);
        parse_dense_optim(s);
        parse_criteo_set(s);
        parse_reduce_op(s);
        parse_dtype(s);
        break;
    }
  } catch (const InputError&) {
  }
  return 0;
}
