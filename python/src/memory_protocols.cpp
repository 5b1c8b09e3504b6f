// hmc.Memory as a producer: the buffer protocol over host memory, and DLPack over host, CUDA and
// HIP memory. Every export takes a reference to the Memory object and counts in its `exports`
// (and its context's `exported`); Memory.free() and Context.close() refuse while the count is not
// 0, so that no memoryview, numpy array or DLPack consumer ever sees freed memory. The counts
// are changed with the GIL held, as all state of the package is.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <utility>

#include "dlpack_abi.h"
#include "errors.h"
#include "objects.h"

namespace py = pybind11;
using namespace py::literals;

namespace hmcpy {
namespace {

// Refuses an export of memory that is gone: freed, or freed with its context.
void check_live(const Memory& m, const char* call) {
  if (!m.ptr) fail(HMC_ERR_INVALID_HANDLE, call, "the hmc.Memory was freed");
  if (m.core->closed) fail(HMC_ERR_INVALID_HANDLE, call, "the hmc.Memory's context was closed");
}

void count_export(Memory& m, int delta) {
  m.exports += delta;
  m.core->exported += delta;
}

// --- The buffer protocol ----------------------------------------------------------------------

// bf_getbuffer: a writable 1-D view of unsigned bytes ('B') over all of a host Memory.
int get_buffer(PyObject* self, Py_buffer* view, int flags) {
  view->obj = nullptr;
  try {
    Memory& m = py::handle(self).cast<Memory&>();
    check_live(m, "Memory (buffer protocol)");
    if (!m.host) {
      PyErr_SetString(PyExc_BufferError,
                      ("hmc.Memory on " + m.device +
                       " is device memory, which Python cannot address: copy it into host "
                       "memory with Context.copy, or use its __dlpack__")
                          .c_str());
      return -1;
    }
    if (PyBuffer_FillInfo(view, self, m.ptr, static_cast<Py_ssize_t>(m.size), 0, flags) != 0)
      return -1;
    count_export(m, +1);
    return 0;
  } catch (const Failure& f) {
    set_python_error(f);
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_BufferError, e.what());
  }
  return -1;
}

// bf_releasebuffer: the view ends (PyBuffer_Release drops its reference to the Memory after).
void release_buffer(PyObject* self, Py_buffer*) {
  try {
    count_export(py::handle(self).cast<Memory&>(), -1);
  } catch (...) {
  }
}

// --- DLPack -----------------------------------------------------------------------------------

// The DLPack device of a Memory: CPU for host memory, CUDA for cuda:N, ROCm for hip:N. DLPack
// has no device type for the other runtimes (mlu, musa): BufferError naming the device.
dl::Device dlpack_device(const Memory& m) {
  if (m.host) return {dl::kCPU, 0};
  const size_t colon = m.device.find(':');
  const std::string kind = m.device.substr(0, colon);
  int id = 0;
  try {
    if (colon != std::string::npos) id = std::stoi(m.device.substr(colon + 1));
  } catch (const std::exception&) {
    id = 0;  // no index in the name
  }
  if (kind == "cuda") return {dl::kCUDA, id};
  if (kind == "hip") return {dl::kROCM, id};
  PyErr_SetString(PyExc_BufferError,
                  ("hmc.Memory on " + m.device + ": DLPack has no device type for " + kind +
                   " devices (host, cuda and hip memory export DLPack; Context.copy moves it)")
                      .c_str());
  throw py::error_already_set();
}

// What a capsule owns: the tensor handed out, its shape, and the Memory object it keeps alive.
struct Export {
  dl::ManagedTensor managed{};
  int64_t shape[1] = {0};
  PyObject* owner = nullptr;  // a reference to the hmc.Memory
  Memory* memory = nullptr;
};

// The tensor's deleter, called by the consumer once it no longer uses the memory (any thread,
// with or without the GIL), or by the capsule of an export never consumed. It takes the GIL;
// where the interpreter is already gone, the Export is left, as everything else then is.
void release_export(dl::ManagedTensor* t) {
  auto* e = static_cast<Export*>(t->manager_ctx);
  if (!Py_IsInitialized() || (!PyGILState_Check() && finalizing())) return;
  PyGILState_STATE gil = PyGILState_Ensure();
  count_export(*e->memory, -1);
  Py_DECREF(e->owner);
  delete e;
  PyGILState_Release(gil);
}

// The capsule's destructor: a capsule still named "dltensor" was never consumed.
void destroy_capsule(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, dl::kCapsuleName)) return;  // consumed: the consumer deletes
  auto* t = static_cast<dl::ManagedTensor*>(PyCapsule_GetPointer(capsule, dl::kCapsuleName));
  if (t && t->deleter) t->deleter(t);
}

py::object dlpack(py::object self, py::object stream, py::object max_version, py::object dl_device,
                  py::object copy) {
  const char* call = "Memory.__dlpack__";
  Memory& m = self.cast<Memory&>();
  check_live(m, call);
  // hmc's own work on the memory (copies, transfers) has ended when its call or request did:
  // there is nothing to order on the consumer's stream, whichever it names.
  if (!stream.is_none() && !py::isinstance<py::int_>(stream))
    throw py::type_error(std::string(call) + "(): stream must be an int or None, not " +
                         Py_TYPE(stream.ptr())->tp_name);
  (void)max_version;  // the capsule is DLPack's unversioned one, which every consumer takes
  const dl::Device device = dlpack_device(m);
  if (!dl_device.is_none()) {
    auto wanted = dl_device.cast<std::pair<int, int>>();
    if (wanted.first != device.type || wanted.second != device.id) {
      PyErr_SetString(
          PyExc_BufferError,
          ("hmc.Memory on " + m.device + " is not on the DLPack device asked for").c_str());
      throw py::error_already_set();
    }
  }
  if (!copy.is_none() && copy.cast<bool>()) {
    PyErr_SetString(PyExc_BufferError, "hmc.Memory exports its memory itself, never a copy");
    throw py::error_already_set();
  }
  auto* e = new Export();
  e->shape[0] = static_cast<int64_t>(m.size);
  dl::Tensor& t = e->managed.dl_tensor;
  t.data = m.ptr;
  t.device = device;
  t.ndim = 1;
  t.dtype = {dl::kUInt, 8, 1};
  t.shape = e->shape;
  t.strides = nullptr;
  t.byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = release_export;
  PyObject* capsule = PyCapsule_New(&e->managed, dl::kCapsuleName, destroy_capsule);
  if (!capsule) {
    delete e;
    throw py::error_already_set();
  }
  e->owner = self.inc_ref().ptr();
  e->memory = &m;
  count_export(m, +1);
  return py::reinterpret_steal<py::object>(capsule);
}

}  // namespace

void bind_memory_protocols(py::class_<Memory, std::shared_ptr<Memory>>& memory) {
  // pybind11's buffer_protocol() made the slots; ours replace its handlers, which cannot count
  // the views released.
  auto* type = reinterpret_cast<PyTypeObject*>(memory.ptr());
  type->tp_as_buffer->bf_getbuffer = get_buffer;
  type->tp_as_buffer->bf_releasebuffer = release_buffer;
  memory
      .def("__dlpack__", &dlpack, "stream"_a = py::none(), py::kw_only(),
           "max_version"_a = py::none(), "dl_device"_a = py::none(), "copy"_a = py::none(),
           "A DLPack capsule of the memory as a 1-D uint8 tensor, which keeps the Memory alive\n"
           "(and refuses free() and the context's close()) until its consumer lets it go.\n"
           "stream is not used: hmc's work on the memory has ended when its call or request did.")
      .def(
          "__dlpack_device__",
          [](const Memory& m) {
            check_live(m, "Memory.__dlpack_device__");
            const dl::Device d = dlpack_device(m);
            return py::make_tuple(d.type, d.id);
          },
          "(device type, device id) in DLPack's numbering: (1, 0) host, (2, N) cuda:N, (10, N)\n"
          "hip:N. Raises BufferError for devices DLPack has no type for (mlu, musa).");
}

}  // namespace hmcpy
