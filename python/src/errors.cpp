#include "errors.h"

#include <map>

namespace py = pybind11;

namespace hmcpy {
namespace {

// hmc.Error, and the subclasses of the statuses a program most often handles apart. Made once
// at import and kept for the life of the process, as the module is.
PyObject* g_error = nullptr;
std::map<hmc_status_t, PyObject*> g_by_status;

struct Subclass {
  hmc_status_t status;
  const char* name;
  PyObject* builtin;  // a standard exception it also is, so generic handlers catch it too
  const char* doc;
};

}  // namespace

void fail_call(hmc_status_t status, const char* call) {
  fail(status, call, hmc_last_error());
}

void fail(hmc_status_t status, const char* call, const std::string& detail) {
  std::string m = std::string(call) + ": " + hmc_status_string(status);
  // hmc's messages usually start with the function's name already.
  std::string prefix = std::string(call) + ": ";
  if (detail.compare(0, prefix.size(), prefix) == 0)
    m += ": " + detail.substr(prefix.size());
  else if (!detail.empty())
    m += ": " + detail;
  throw Failure{status, std::move(m)};
}

void set_python_error(const Failure& f) {
  auto it = g_by_status.find(f.status);
  PyObject* cls = it == g_by_status.end() ? g_error : it->second;
  py::object text = py::reinterpret_steal<py::object>(
      PyUnicode_DecodeUTF8(f.message.data(), static_cast<Py_ssize_t>(f.message.size()), "replace"));
  py::object exc = py::reinterpret_borrow<py::object>(cls)(text);
  exc.attr("status") = py::str(hmc_status_string(f.status));
  exc.attr("code") = py::int_(static_cast<int>(f.status));
  PyErr_SetObject(cls, exc.ptr());
}

void bind_errors(py::module_& m) {
  g_error = PyErr_NewExceptionWithDoc(
      "hmc.Error",
      "A failed hmc call. str(e) says which call failed, its status and hmc's message;\n"
      ".status is the status's name (\"HMC_ERR_TIMEOUT\") and .code its value (-7).",
      PyExc_Exception, nullptr);
  if (!g_error) throw py::error_already_set();
  m.add_object("Error", py::handle(g_error));
  const Subclass subclasses[] = {
      {HMC_ERR_TIMEOUT, "TimeoutError", PyExc_TimeoutError,
       "HMC_ERR_TIMEOUT: the wait ended before the operation did (a request stays pending)."},
      {HMC_ERR_PEER_LOST, "PeerLostError", PyExc_ConnectionError,
       "HMC_ERR_PEER_LOST: the peer died or disconnected."},
      {HMC_ERR_CANCELLED, "CancelledError", nullptr,
       "HMC_ERR_CANCELLED: the request was cancelled, its peer or context closed."},
      {HMC_ERR_INVALID_ARGUMENT, "InvalidArgumentError", PyExc_ValueError,
       "HMC_ERR_INVALID_ARGUMENT: a bad buffer, size, tag, flag or descriptor."},
      {HMC_ERR_OUT_OF_BOUNDS, "OutOfBoundsError", nullptr,
       "HMC_ERR_OUT_OF_BOUNDS: an offset or size outside a region."},
      {HMC_ERR_REMOTE, "RemoteError", nullptr,
       "HMC_ERR_REMOTE: the peer refused (bounds, unknown region, access rights) or aborted."},
      {HMC_ERR_NOT_SUPPORTED, "NotSupportedError", nullptr,
       "HMC_ERR_NOT_SUPPORTED: no plugin or path offers this operation."},
      {HMC_ERR_INVALID_HANDLE, "InvalidHandleError", nullptr,
       "HMC_ERR_INVALID_HANDLE: the object was closed, released or freed."},
  };
  for (const Subclass& s : subclasses) {
    py::tuple bases = s.builtin ? py::make_tuple(py::handle(g_error), py::handle(s.builtin))
                                : py::make_tuple(py::handle(g_error));
    std::string qualified = std::string("hmc.") + s.name;
    PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), s.doc, bases.ptr(), nullptr);
    if (!cls) throw py::error_already_set();
    g_by_status[s.status] = cls;
    m.add_object(s.name, py::handle(cls));
  }

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Failure& f) {
      set_python_error(f);
    }
  });
}

}  // namespace hmcpy
