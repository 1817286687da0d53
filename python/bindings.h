#pragma once
// The parts of sparq._sparq (python/sparq_module.cc puts them together), one
// file each. Arrays cross as numpy views of CPU tensors (array_views.h);
// every collective runs with the GIL released.
#include <pybind11/pybind11.h>

#include "sparq/transport/transport.h"

namespace sparq {

// sparq.Comm, connected over Gloo (through the job's torch.distributed store)
// or MPI (when mpiexec started the job), and MPI's start and end for the
// bridge (comm_bindings.cc).
void add_comm(pybind11::module_& m);
// A transport's counters of one peer (or their total) as a dict.
pybind11::dict counters_dict(const PeerCounters& c);

// Data parallelism's gradient exchange with every --dp-codec, and the
// quantized ring's messages for a caller that encodes its chunks itself
// (exchange_bindings.cc).
void add_grad_exchange(pybind11::module_& m);

// The quantized alltoallv of table-wise embeddings, its blocks' codec, and
// the alltoallv of blocks a GPU rank encoded itself (alltoall_bindings.cc).
void add_alltoall(pybind11::module_& m);

// The CPU codecs themselves, for the GPU kernels' tests to compare against
// bit for bit (python/sparq/gpu/): row-wise quantization, threshold packing,
// sparse streams, DCT's threshold and TopK (codec_bindings.cc).
void add_codecs(pybind11::module_& m);

// DCT-MP's selection and wire format (sparq/compress/dct_mp.h) for
// sparq.torch's cuts: RowMask, dct_mp_kept, dct_mp_forward, dct_mp_receive,
// dct_mp_gather, dct_mp_scatter, dct_mp_values_encode, dct_mp_values_decode
// (dct_mp_bindings.cc).
void add_dct_mp(pybind11::module_& m);

}  // namespace sparq
