#pragma once
// Where `sparq train` gets its samples: data files (TSV, binary, .npz), the
// reference's split of the raw Criteo sets (loaded, or streamed each epoch),
// or generated (synthetic with a teacher, or random).
#include "sparq/model/dlrm.h"
#include "sparq/train/train_data.h"
#include "tools/train_args.h"

namespace sparq::cli {

TrainData load_data(const TrainArgs& a);

}  // namespace sparq::cli
