#include "buffers.h"

#include <hmc/hmc.h>

#include <cstdint>
#include <string>

#include "dlpack_abi.h"
#include "errors.h"
#include "objects.h"

namespace py = pybind11;

namespace hmcpy {
namespace {

// The message of the pending Python error, which is cleared.
std::string take_python_error() {
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  std::string text = "unknown error";
  if (value) {
    PyObject* s = PyObject_Str(value);
    if (s) {
      const char* c = PyUnicode_AsUTF8(s);
      if (c) text = c;
      Py_DECREF(s);
    }
  }
  PyErr_Clear();
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(trace);
  return text;
}

// The tensor of a DLPack capsule: its address and size, when it is contiguous and reachable.
void describe_dlpack(py::handle capsule, const char* call, void** ptr, size_t* size) {
  auto* m = static_cast<dl::ManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), dl::kCapsuleName));
  if (!m) {
    take_python_error();
    fail(HMC_ERR_INVALID_ARGUMENT, call, "the DLPack capsule was already consumed");
  }
  const dl::Tensor& t = m->dl_tensor;
  if (!dl::reachable(t.device.type))
    fail(HMC_ERR_INVALID_ARGUMENT, call,
         "the tensor is on DLPack device type " + std::to_string(t.device.type) +
             ", which hmc cannot reach (host, CUDA and ROCm memory only)");
  const size_t bits = size_t{t.dtype.bits} * t.dtype.lanes;
  if (bits % 8 != 0)
    fail(HMC_ERR_INVALID_ARGUMENT, call, "the tensor's elements are not whole bytes");
  size_t count = 1;
  int64_t expected = 1;  // the stride of a compact row-major layout, from the last dimension
  bool contiguous = true;
  for (int32_t d = t.ndim - 1; d >= 0; --d) {
    const int64_t extent = t.shape[d];
    if (t.strides && extent != 1 && t.strides[d] != expected) contiguous = false;
    expected *= extent;
    count *= static_cast<size_t>(extent);
  }
  if (!contiguous && count != 0)
    fail(HMC_ERR_INVALID_ARGUMENT, call,
         "the tensor is not contiguous (make it so first: .contiguous(), np.ascontiguousarray)");
  *ptr = static_cast<char*>(t.data) + t.byte_offset;
  *size = count * (bits / 8);
}

}  // namespace

std::unique_ptr<Pinned> Pinned::from(py::handle obj, bool writable, const char* call) {
  std::unique_ptr<Pinned> p(new Pinned());
  if (py::isinstance<Memory>(obj)) {
    auto mem = obj.cast<std::shared_ptr<Memory>>();
    if (!mem->ptr) fail(HMC_ERR_INVALID_HANDLE, call, "the hmc.Memory was freed");
    p->ptr_ = mem->ptr;
    p->size_ = mem->size;
    ++mem->pins;
    p->memory_ = std::move(mem);
    return p;
  }
  if (py::isinstance<py::tuple>(obj) && py::len(obj) == 2) {
    py::tuple t = py::reinterpret_borrow<py::tuple>(obj);
    if (!py::isinstance<py::int_>(t[0]) || !py::isinstance<py::int_>(t[1]))
      fail(HMC_ERR_INVALID_ARGUMENT, call, "a (pointer, size) pair must hold two integers");
    try {
      p->ptr_ = reinterpret_cast<void*>(t[0].cast<uintptr_t>());
      p->size_ = t[1].cast<size_t>();
    } catch (const py::cast_error&) {
      fail(HMC_ERR_INVALID_ARGUMENT, call,
           "the pointer or size of a (pointer, size) pair is negative or too large");
    }
    p->owner_ = py::reinterpret_borrow<py::object>(obj);
    return p;
  }
  if (PyObject_CheckBuffer(obj.ptr())) {
    int flags = PyBUF_ANY_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj.ptr(), &p->view_, flags) != 0)
      fail(HMC_ERR_INVALID_ARGUMENT, call,
           std::string(writable ? "the buffer must be contiguous and writable: "
                                : "the buffer must be contiguous: ") +
               take_python_error());
    p->has_view_ = true;
    p->ptr_ = p->view_.buf;
    p->size_ = static_cast<size_t>(p->view_.len);
    return p;
  }
  // DLPack: a capsule, or an object that makes one (a torch tensor). The capsule, held, keeps
  // the tensor alive; it is not consumed, so its producer frees it as usual.
  py::object capsule;
  if (PyCapsule_IsValid(obj.ptr(), dl::kCapsuleName)) {
    capsule = py::reinterpret_borrow<py::object>(obj);
  } else if (py::hasattr(obj, "__dlpack__")) {
    try {
      capsule = obj.attr("__dlpack__")();
    } catch (py::error_already_set& e) {
      fail(HMC_ERR_INVALID_ARGUMENT, call, std::string("__dlpack__() failed: ") + e.what());
    }
    if (!PyCapsule_IsValid(capsule.ptr(), dl::kCapsuleName))
      fail(HMC_ERR_INVALID_ARGUMENT, call, "__dlpack__() did not return a DLPack capsule");
  }
  if (capsule) {
    describe_dlpack(capsule, call, &p->ptr_, &p->size_);
    p->owner_ = std::move(capsule);
    return p;
  }
  fail(HMC_ERR_INVALID_ARGUMENT, call,
       std::string("a ") + Py_TYPE(obj.ptr())->tp_name +
           " is not a buffer: pass an object with the buffer protocol (numpy array, bytearray, "
           "memoryview), a DLPack tensor or capsule, an hmc.Memory, or a (pointer, size) pair");
}

Pinned::~Pinned() {
  if (has_view_) PyBuffer_Release(&view_);
  if (memory_) --memory_->pins;
}

}  // namespace hmcpy
