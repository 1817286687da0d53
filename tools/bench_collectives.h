#pragma once
// What `sparq bench allreduce|alltoall` times, for `sparq plan --measure`:
// float32 sums, every result checked (Row::wrong).
#include <cstdint>
#include <vector>

#include "tools/bench_table.h"

namespace sparq::cli {

// A row a size of sparq's ring allreduce (1 MiB segments).
std::vector<Row> ring_allreduce_rows(Transport& t, const BenchFlags& f, const std::vector<std::uint64_t>& sizes);
// A row a size of sparq's pairwise alltoall (`size` bytes a rank in all).
std::vector<Row> pairwise_alltoall_rows(Transport& t, const BenchFlags& f, const std::vector<std::uint64_t>& sizes);

}  // namespace sparq::cli
