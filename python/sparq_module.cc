// sparq._sparq: the C++ side of the PyTorch bridge. It binds the transports
// (Gloo, connected through the job's torch.distributed store; MPI, when
// mpiexec started the job), the gradient exchange of data parallelism (every
// --dp-codec), the quantized alltoallv, DCT-MP's cuts and the CPU codecs
// (python/bindings.h lists the parts). Arrays cross as numpy views of CPU
// tensors, never copied: an array that would need a copy (another dtype, not
// contiguous, read-only) is refused, because the result would land in the
// copy. Every collective runs with the GIL released; sparq's errors arrive as
// sparq.Error subclasses.
#include <pybind11/pybind11.h>

#include "python/bindings.h"
#include "sparq/core/error.h"

namespace py = pybind11;
using namespace sparq;

PYBIND11_MODULE(_sparq, m) {
  m.doc() = "sparq's compressed collectives (C++), for sparq.torch";

  static py::exception<Error> error(m, "Error", PyExc_RuntimeError);
  static py::exception<InputError> input_error(m, "InputError", error.ptr());
  static py::exception<NonFiniteError> non_finite_error(m, "NonFiniteError", input_error.ptr());
  static py::exception<TimeoutError> timeout_error(m, "TimeoutError", error.ptr());
  static py::exception<WireError> wire_error(m, "WireError", error.ptr());
  static py::exception<AbortedError> aborted_error(m, "AbortedError", error.ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const NonFiniteError& e) {
      py::set_error(non_finite_error, e.what());
    } catch (const InputError& e) {
      py::set_error(input_error, e.what());
    } catch (const TimeoutError& e) {
      py::set_error(timeout_error, e.what());
    } catch (const WireError& e) {
      py::set_error(wire_error, e.what());
    } catch (const AbortedError& e) {
      py::set_error(aborted_error, e.what());
    } catch (const Error& e) {
      py::set_error(error, e.what());
    }
  });

  add_comm(m);
  add_grad_exchange(m);
  add_alltoall(m);
  add_dct_mp(m);
  add_codecs(m);
}
