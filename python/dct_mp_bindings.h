#pragma once
#include <pybind11/pybind11.h>

namespace sparq {
// DCT-MP's selection and wire format (sparq/compress/dct_mp.h) for
// sparq.torch's cuts: RowMask, dct_mp_kept, dct_mp_forward, dct_mp_receive,
// dct_mp_gather, dct_mp_scatter, dct_mp_values_encode, dct_mp_values_decode.
void add_dct_mp(pybind11::module_& m);
}  // namespace sparq
