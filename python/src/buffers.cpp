#include "buffers.h"

#include <hmc/hmc.h>

#include <string>

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
  fail(HMC_ERR_INVALID_ARGUMENT, call,
       std::string("a ") + Py_TYPE(obj.ptr())->tp_name +
           " is not a buffer: pass an object with the buffer protocol (numpy array, bytearray, "
           "memoryview), an hmc.Memory, or a (pointer, size) pair");
}

Pinned::~Pinned() {
  if (has_view_) PyBuffer_Release(&view_);
  if (memory_) --memory_->pins;
}

}  // namespace hmcpy
