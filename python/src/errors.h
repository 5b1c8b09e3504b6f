// Failures of hmc calls, and how they become Python exceptions.
#pragma once

#include <hmc/hmc.h>
#include <pybind11/pybind11.h>

#include <string>

namespace hmcpy {

// Thrown by the binding's C++ code; translated into hmc.Error or one of its subclasses, which
// carry the status's name (.status) and value (.code).
struct Failure {
  hmc_status_t status;
  std::string message;  // "<call>: <status name>: <what went wrong>"
};

// The failure of C call `call` that just returned `status`: reads hmc_last_error() of this thread,
// so it must be built before the thread's next hmc call.
[[noreturn]] void fail_call(hmc_status_t status, const char* call);
// A failure found by the binding itself (a bad buffer, a closed object).
[[noreturn]] void fail(hmc_status_t status, const char* call, const std::string& detail);

inline void check(hmc_status_t status, const char* call) {
  if (status != HMC_SUCCESS) fail_call(status, call);
}

// Sets the Python error of f (hmc.Error or its subclass), for C slots that cannot throw.
void set_python_error(const Failure& f);

// Creates hmc.Error and its subclasses in module m and registers the translator of Failure.
void bind_errors(pybind11::module_& m);

}  // namespace hmcpy
