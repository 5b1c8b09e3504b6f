// hmc._hmc: the Python binding of hmc's C API (hmc.h). The package hmc re-exports it; the
// documentation is docs/python.md, the signatures hmc/_hmc.pyi.
#include <hmc/hmc.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

#include "buffers.h"
#include "errors.h"
#include "objects.h"

namespace py = pybind11;
using namespace py::literals;

namespace hmcpy {
namespace {

int resolved(const Core& core, int timeout_ms) {
  return timeout_ms < 0 ? core.default_timeout_ms : timeout_ms;
}

py::bytes to_bytes(const void* p, size_t n) {
  return py::bytes(static_cast<const char*>(p), n);
}

std::shared_ptr<Peer> adopt_peer(const std::shared_ptr<Core>& core, hmc_peer_t h) {
  auto peer = std::make_shared<Peer>(core, h);
  core->peers[h] = peer;
  return peer;
}

std::shared_ptr<Peer> connect(const std::shared_ptr<Core>& self, py::handle addr, int timeout_ms) {
  const char* call = "hmc_connect";
  check_timeout(timeout_ms, call);
  auto a = Pinned::from(addr, false, call);
  hmc_context_t c = self->handle(call);
  hmc_peer_t p = nullptr;
  hmc_status_t st;
  {
    Blocking b(*self, call);
    st = hmc_connect(c, a->ptr(), a->size(), timeout_ms, &p);
  }
  check(st, call);
  return adopt_peer(self, p);
}

std::shared_ptr<Peer> accept(const std::shared_ptr<Core>& self, int timeout_ms) {
  const char* call = "hmc_accept";
  check_timeout(timeout_ms, call);
  hmc_context_t c = self->handle(call);
  hmc_peer_t p = nullptr;
  hmc_status_t st =
      wait_sliced(*self, timeout_ms, call, [&](int slice) { return hmc_accept(c, slice, &p); });
  if (st == HMC_ERR_TIMEOUT)
    fail(st, call,
         "no peer connected within " + std::to_string(resolved(*self, timeout_ms)) + " ms");
  check(st, call);
  return adopt_peer(self, p);
}

struct Notification {
  py::object peer;  // the Peer that sent it, or None when its Python object is gone
  uint64_t value;
  py::bytes data;  // the bytes it carries, b"" when none
};

Notification notify_wait(const std::shared_ptr<Core>& self, int timeout_ms) {
  const char* call = "hmc_notify_wait_msg";
  check_timeout(timeout_ms, call);
  hmc_context_t c = self->handle(call);
  hmc_notification_t n{};
  // Room for the most a notification carries: it never comes back truncated.
  std::string buf(HMC_NOTIFY_MAX_BYTES, '\0');
  size_t size = 0;
  hmc_status_t st = wait_sliced(*self, timeout_ms, call, [&](int slice) {
    return hmc_notify_wait_msg(c, slice, &n, &buf[0], buf.size(), &size);
  });
  if (st == HMC_ERR_TIMEOUT)
    fail(st, call,
         "no notification arrived within " + std::to_string(resolved(*self, timeout_ms)) + " ms");
  check(st, call);
  py::object peer = py::none();
  auto it = self->peers.find(n.peer);
  if (it != self->peers.end())
    if (auto p = it->second.lock()) peer = py::cast(p);
  return Notification{peer, n.value, py::bytes(buf.data(), size)};
}

// Whether the named device is host memory (hmc_device_info's is_host).
bool is_host_device(hmc_context_t c, const std::string& name) {
  int n = 0;
  if (hmc_device_count(c, &n) != HMC_SUCCESS) return false;
  for (int i = 0; i < n; ++i) {
    hmc_device_info_t d{};
    d.struct_size = sizeof d;
    if (hmc_device_info(c, i, &d) == HMC_SUCCESS && name == d.name) return d.is_host != 0;
  }
  return false;
}

std::shared_ptr<Memory> alloc(const std::shared_ptr<Core>& self, const std::string& device,
                              size_t size) {
  hmc_context_t c = self->handle("hmc_mem_alloc");
  auto m = std::make_shared<Memory>();
  check(hmc_mem_alloc(c, device.c_str(), size, &m->ptr), "hmc_mem_alloc");
  m->core = self;
  m->size = size;
  m->device = device;
  m->host = is_host_device(c, device);
  return m;
}

void copy(const std::shared_ptr<Core>& self, py::handle dst, py::handle src,
          std::optional<size_t> size) {
  const char* call = "hmc_mem_copy";
  auto d = Pinned::from(dst, true, call);
  auto s = Pinned::from(src, false, call);
  size_t n = size ? *size : s->size();
  if (n > s->size() || n > d->size())
    fail(HMC_ERR_INVALID_ARGUMENT, call,
         "copying " + std::to_string(n) + " bytes from a buffer of " + std::to_string(s->size()) +
             " into one of " + std::to_string(d->size()));
  hmc_context_t c = self->handle(call);
  hmc_status_t st;
  {
    Blocking b(*self, call);
    st = hmc_mem_copy(c, d->ptr(), s->ptr(), n);
  }
  check(st, call);
}

std::shared_ptr<Region> register_memory(const std::shared_ptr<Core>& self, py::handle buf,
                                        uint32_t access) {
  const char* call = "hmc_mem_register";
  auto r = std::make_shared<Region>();
  r->memory = Pinned::from(buf, (access & HMC_ACCESS_REMOTE_WRITE) != 0, call);
  hmc_context_t c = self->handle(call);
  hmc_status_t st;
  {
    Blocking b(*self, call);
    st = hmc_mem_register(c, r->memory->ptr(), r->memory->size(), access, &r->h);
  }
  check(st, call);
  r->core = self;
  return r;
}

py::list devices(const std::shared_ptr<Core>& self) {
  hmc_context_t c = self->handle("hmc_device_count");
  int n = 0;
  check(hmc_device_count(c, &n), "hmc_device_count");
  py::list out;
  for (int i = 0; i < n; ++i) {
    hmc_device_info_t d{};
    d.struct_size = sizeof d;
    check(hmc_device_info(c, i, &d), "hmc_device_info");
    out.append(py::dict("name"_a = d.name, "plugin"_a = d.plugin, "model"_a = d.model,
                        "pci_bus_id"_a = d.pci_bus_id, "numa_node"_a = d.numa_node,
                        "mem_bytes"_a = d.mem_bytes, "is_host"_a = d.is_host != 0));
  }
  return out;
}

// --- Peer operations ------------------------------------------------------------------------

std::shared_ptr<Request> posted(const std::shared_ptr<Peer>& peer, hmc_request_t r,
                                std::unique_ptr<Pinned> buf, const char* call,
                                py::object keep = py::object()) {
  return std::make_shared<Request>(peer->core, peer, r, std::move(buf), std::move(keep), call);
}

std::shared_ptr<Request> send(const std::shared_ptr<Peer>& self, py::handle buf, uint64_t tag) {
  const char* call = "hmc_send";
  auto b = Pinned::from(buf, false, call);
  hmc_request_t r = nullptr;
  check(hmc_send(self->handle(call), b->ptr(), b->size(), tag, &r), call);
  return posted(self, r, std::move(b), call);
}

std::shared_ptr<Request> recv(const std::shared_ptr<Peer>& self, py::handle buf, uint64_t tag) {
  const char* call = "hmc_recv";
  auto b = Pinned::from(buf, true, call);
  hmc_request_t r = nullptr;
  check(hmc_recv(self->handle(call), b->ptr(), b->size(), tag, &r), call);
  return posted(self, r, std::move(b), call);
}

RemoteRegion& remote_of(py::handle remote, const char* call) {
  if (!py::isinstance<RemoteRegion>(remote))
    fail(HMC_ERR_INVALID_ARGUMENT, call, "remote must be an hmc.RemoteRegion");
  return remote.cast<RemoteRegion&>();
}

// A notification as Python gives it: an int (the value), bytes-like (value 0 with those bytes)
// or a tuple (int, bytes-like). None: no notification.
struct NotifyArg {
  bool on = false;
  bool with_bytes = false;  // given bytes: it goes by the calls of hmc_notify_msg_t
  uint64_t value = 0;
  std::string bytes;
  hmc_notify_msg_t msg() const { return {value, bytes.data(), bytes.size()}; }
};

bool bytes_like(py::handle h) {
  return PyBytes_Check(h.ptr()) || PyByteArray_Check(h.ptr()) || PyMemoryView_Check(h.ptr());
}

// The bytes of a bytes-like object (a memoryview must be contiguous).
std::string bytes_of(py::handle h) {
  auto b = py::reinterpret_steal<py::object>(PyBytes_FromObject(h.ptr()));
  if (!b) throw py::error_already_set();
  return std::string(py::cast<py::bytes>(b));
}

// where: the argument as the TypeError names it, e.g. "Peer.put(): argument 'notify'".
uint64_t notify_value_of(py::handle h, const std::string& where, const char* call) {
  if (!PyLong_Check(h.ptr()))
    throw py::type_error(where + " must be int, not " +
                         std::string(py::str(h.get_type().attr("__name__"))));
  unsigned long long v = PyLong_AsUnsignedLongLong(h.ptr());
  if (PyErr_Occurred()) {
    PyErr_Clear();
    fail(HMC_ERR_INVALID_ARGUMENT, call,
         "the notification value must be in [0, 2**64), not " + std::string(py::str(h)));
  }
  return v;
}

NotifyArg notify_of(py::handle h, const char* method, const char* call) {
  NotifyArg a;
  if (h.is_none()) return a;
  const std::string where = std::string(method) + "(): argument 'notify'";
  a.on = true;
  if (PyLong_Check(h.ptr())) {
    a.value = notify_value_of(h, where, call);
  } else if (bytes_like(h)) {
    a.with_bytes = true;
    a.bytes = bytes_of(h);
  } else if (PyTuple_Check(h.ptr()) && PyTuple_GET_SIZE(h.ptr()) == 2 &&
             PyLong_Check(PyTuple_GET_ITEM(h.ptr(), 0)) &&
             bytes_like(PyTuple_GET_ITEM(h.ptr(), 1))) {
    a.with_bytes = true;
    a.value = notify_value_of(PyTuple_GET_ITEM(h.ptr(), 0), where, call);
    a.bytes = bytes_of(PyTuple_GET_ITEM(h.ptr(), 1));
  } else {
    throw py::type_error(where + " must be int, bytes or (int, bytes), not " +
                         std::string(py::str(h.get_type().attr("__name__"))));
  }
  return a;
}

std::shared_ptr<Request> put(const std::shared_ptr<Peer>& self, py::handle buf, py::handle remote,
                             uint64_t offset, py::handle notify_obj) {
  NotifyArg notify = notify_of(notify_obj, "Peer.put", "hmc_put");
  const char* call = notify.with_bytes ? "hmc_put_notify" : "hmc_put";
  auto b = Pinned::from(buf, false, call);
  hmc_remote_t rh = remote_of(remote, call).handle(call);
  hmc_request_t r = nullptr;
  if (notify.with_bytes) {
    const hmc_notify_msg_t n = notify.msg();
    check(hmc_put_notify(self->handle(call), b->ptr(), b->size(), rh, offset, &n, &r), call);
  } else {
    check(hmc_put(self->handle(call), b->ptr(), b->size(), rh, offset,
                  notify.on ? HMC_PUT_NOTIFY : 0, notify.value, &r),
          call);
  }
  return posted(self, r, std::move(b), call);
}

// Peer.notify: a notification without data (hmc_notify_send).
std::shared_ptr<Request> notify_send(const std::shared_ptr<Peer>& self, py::handle value,
                                     py::handle data) {
  const char* call = "hmc_notify_send";
  NotifyArg a;
  a.value = notify_value_of(value, "Peer.notify(): argument 'value'", call);
  if (!bytes_like(data))
    throw py::type_error("Peer.notify(): argument 'data' must be bytes, not " +
                         std::string(py::str(data.get_type().attr("__name__"))));
  a.bytes = bytes_of(data);
  const hmc_notify_msg_t n = a.msg();
  hmc_request_t r = nullptr;
  check(hmc_notify_send(self->handle(call), &n, &r), call);
  return posted(self, r, nullptr, call);
}

std::shared_ptr<Request> get(const std::shared_ptr<Peer>& self, py::handle buf, py::handle remote,
                             uint64_t offset) {
  const char* call = "hmc_get";
  auto b = Pinned::from(buf, true, call);
  hmc_remote_t rh = remote_of(remote, call).handle(call);
  hmc_request_t r = nullptr;
  check(hmc_get(self->handle(call), b->ptr(), b->size(), rh, offset, &r), call);
  return posted(self, r, std::move(b), call);
}

std::shared_ptr<RemoteRegion> import_remote(const std::shared_ptr<Peer>& self, py::handle desc) {
  const char* call = "hmc_remote_import";
  auto d = Pinned::from(desc, false, call);
  hmc_peer_t p = self->handle(call);
  auto r = std::make_shared<RemoteRegion>();
  hmc_status_t st;
  {
    // Asks the peer whether the region is live.
    Blocking b(*self->core, call);
    st = hmc_remote_import(p, d->ptr(), d->size(), &r->h);
  }
  check(st, call);
  r->peer = self;
  check(hmc_remote_size(r->h, &r->size), "hmc_remote_size");
  return r;
}

py::dict peer_info(const std::shared_ptr<Peer>& self) {
  hmc_peer_info_t i{};
  i.struct_size = sizeof i;
  check(hmc_peer_info(self->handle("hmc_peer_info"), &i), "hmc_peer_info");
  return py::dict(
      "path"_a = i.path, "path_reason"_a = i.path_reason, "remote_host"_a = i.remote_host,
      "same_host"_a = i.same_host != 0, "remote_pid"_a = i.remote_pid,
      "est_bandwidth_MBps"_a = i.est_bandwidth_MBps, "est_latency_us"_a = i.est_latency_us,
      "alive"_a = i.alive != 0, "device_ipc"_a = i.device_ipc, "ipc_messages"_a = i.ipc_messages,
      "staged_transfers"_a = i.staged_transfers,
      "shared_staged_messages"_a = i.shared_staged_messages, "remote_address"_a = i.remote_address,
      "direct_transfers"_a = i.direct_transfers, "device_memory"_a = i.device_memory);
}

std::shared_ptr<TransferList> prepare(py::object region, py::object remote, py::handle op,
                                      py::handle descs) {
  const char* call = "hmc_xfer_prepare";
  if (!py::isinstance<Region>(region))
    fail(HMC_ERR_INVALID_ARGUMENT, call, "region must be an hmc.Region");
  remote_of(remote, call);
  return prepare_list(std::move(region), std::move(remote), op, descs);
}

std::shared_ptr<Request> post(py::object self, py::handle notify_obj) {
  NotifyArg notify = notify_of(notify_obj, "TransferList.post", "hmc_xfer_post");
  const char* call = notify.with_bytes ? "hmc_xfer_post_notify" : "hmc_xfer_post";
  auto& list = self.cast<TransferList&>();
  hmc_request_t r = nullptr;
  if (notify.with_bytes) {
    const hmc_notify_msg_t n = notify.msg();
    check(hmc_xfer_post_notify(list.handle(call), &n, &r), call);
  } else {
    check(hmc_xfer_post(list.handle(call), notify.on ? HMC_XFER_NOTIFY : 0, notify.value, &r),
          call);
  }
  // The list holds its region, whose memory the post reads or writes.
  return std::make_shared<Request>(list.core, list.peer, r, nullptr, std::move(self), call);
}

// Context.close: hmc.aio, when imported, lets its waiters on this context go first (their
// reader leaves the event descriptor before the descriptor closes) and then ends them with what
// their requests say once closed, so an await never outlives its context.
void close_context(const std::shared_ptr<Core>& self) {
  self->check_no_exports("hmc_context_destroy");
  py::dict modules = py::module_::import("sys").attr("modules");
  py::object aio = modules.contains("hmc.aio") ? py::object(modules["hmc.aio"]) : py::none();
  py::object ctx = py::cast(self);
  if (!aio.is_none()) aio.attr("_closing")(ctx);
  try {
    self->close();
  } catch (...) {
    if (!aio.is_none()) aio.attr("_closed")(ctx);
    throw;
  }
  if (!aio.is_none()) aio.attr("_closed")(ctx);
}

// Closes the context unless a thread waits in hmc on it or a buffer of its memory is exported
// (closing would wait for the one and is refused for the other): false then, and it stays open.
bool close_context_if_idle(const std::shared_ptr<Core>& self) {
  {
    std::lock_guard<std::mutex> lock(self->mutex);
    if (self->closed || self->blocking > 0 || self->exported > 0) return false;
  }
  close_context(self);
  return true;
}

template <typename T>
void bind_context_manager(py::class_<T, std::shared_ptr<T>>& c, void (T::*end)()) {
  c.def("__enter__", [](py::object self) {
     return self;
   }).def("__exit__", [end](T& self, py::args) { (self.*end)(); });
}

std::string hex(const void* p) {
  char b[32];
  snprintf(b, sizeof b, "%#zx", reinterpret_cast<size_t>(p));
  return b;
}

}  // namespace
}  // namespace hmcpy

PYBIND11_MODULE(_hmc, m) {
  using namespace hmcpy;
  m.doc() = "hmc: Heterogeneous Memory Communication (the extension; import hmc instead)";
  bind_errors(m);
  m.def(
      "version", [] { return std::string(hmc_version()); }, "hmc's library version (\"0.1.0\").");
  m.def(
      "address_from_host",
      [](const std::string& host_port) {
        char buf[HMC_ADDRESS_MAX];
        size_t len = sizeof buf;
        check(hmc_address_from_host(host_port.c_str(), buf, &len), "hmc_address_from_host");
        return to_bytes(buf, len);
      },
      "host_port"_a,
      "The address of the context listening at \"host:port\" (HMC_LISTEN_HOST/HMC_LISTEN_PORT).");
  m.attr("ACCESS_REMOTE_READ") = HMC_ACCESS_REMOTE_READ;
  m.attr("ACCESS_REMOTE_WRITE") = HMC_ACCESS_REMOTE_WRITE;
  m.attr("ADDRESS_MAX") = HMC_ADDRESS_MAX;
  m.attr("TAG_MAX") = HMC_TAG_MAX;
  m.attr("NOTIFY_MAX_BYTES") = HMC_NOTIFY_MAX_BYTES;

  py::class_<Notification>(m, "Notification", "A notification from a peer's put or transfer list.")
      .def_readonly("peer", &Notification::peer, "The Peer that sent it (None if it was dropped).")
      .def_readonly("value", &Notification::value, "The value it carries.")
      .def_readonly("data", &Notification::data, "The bytes it carries (b\"\" when none).")
      .def("__repr__", [](const Notification& n) {
        return "hmc.Notification(value=" + std::to_string(n.value) +
               ", data=" + std::string(py::repr(n.data)) + ")";
      });

  py::class_<Memory, std::shared_ptr<Memory>> memory(
      m, "Memory", py::buffer_protocol(),
      "Memory from Context.alloc on a device (\"host\", \"cuda:0\"). Pass it as a buffer to any\n"
      "call. Host memory has the buffer protocol (memoryview(mem), numpy.frombuffer(mem));\n"
      "host, CUDA and HIP memory export DLPack (numpy.from_dlpack, torch.from_dlpack). Python\n"
      "cannot read device memory itself: use Context.copy.");
  memory
      .def_property_readonly("ptr",
                             [](const Memory& x) { return reinterpret_cast<uintptr_t>(x.ptr); })
      .def_readonly("size", &Memory::size)
      .def_readonly("device", &Memory::device)
      .def("free", &Memory::free,
           "Frees it now (refused while a request or region uses it, or a buffer view or\n"
           "DLPack tensor of it is alive).")
      .def("__repr__", [](const Memory& x) {
        return "hmc.Memory(device='" + x.device + "', ptr=" + hex(x.ptr) +
               ", size=" + std::to_string(x.size) + ")";
      });
  bind_context_manager(memory, &Memory::free);
  bind_memory_protocols(memory);

  py::class_<Request, std::shared_ptr<Request>>(
      m, "Request",
      "A send, recv, put, get or transfer-list post in flight. It holds its buffer until it\n"
      "ends; dropping it while it runs cancels it and waits for its end.")
      .def("wait", &Request::wait, "timeout_ms"_a = -1,
           "Waits for the end and returns the bytes received or moved. Raises hmc.Error on\n"
           "failure; hmc.TimeoutError leaves the request pending. -1: HMC_TIMEOUT_MS. Ctrl-C\n"
           "raises KeyboardInterrupt, with the request still pending.")
      .def("test", &Request::test,
           "The bytes moved once the request ended, None while it runs; raises on failure.")
      .def("cancel", &Request::cancel,
           "Asks to cancel: True if it will end with hmc.CancelledError, False if too late.")
      .def_property_readonly("done", &Request::done, "Whether wait() or test() saw it end.")
      .def_property_readonly(
          "context", [](const Request& r) { return r.core; }, "The Context the request runs in.")
      .def(
          "__await__",
          [](py::object self) {
            return py::module_::import("hmc.aio").attr("wait")(self).attr("__await__")();
          },
          "await request: hmc.aio.wait(request), from a running asyncio loop.")
      .def("__repr__", [](const Request& r) {
        std::string state = !r.ended ? "pending"
                            : r.status == HMC_SUCCESS
                                ? "done, " + std::to_string(r.bytes) + " bytes"
                                : std::string("failed: ") + hmc_status_string(r.status);
        return std::string("<hmc.Request ") + r.call + ", " + state + ">";
      });

  py::class_<Region, std::shared_ptr<Region>> region(
      m, "Region", "Local memory registered for peers' put and get (Context.register).");
  region
      .def(
          "pack",
          [](const Region& r) {
            hmc_region_t h = r.handle("hmc_region_pack");
            size_t len = 0;
            (void)hmc_region_pack(h, nullptr, &len);  // asks for the size
            std::string buf(len, '\0');
            check(hmc_region_pack(h, buf.data(), &len), "hmc_region_pack");
            buf.resize(len);
            return py::bytes(buf);
          },
          "The descriptor to hand to peers (Peer.import_remote on their side).")
      .def("deregister", &Region::deregister,
           "Ends the registration (waits for peers' operations on it to end).")
      .def_property_readonly("ptr",
                             [](const Region& r) {
                               return r.memory ? reinterpret_cast<uintptr_t>(r.memory->ptr()) : 0;
                             })
      .def_property_readonly("size",
                             [](const Region& r) { return r.memory ? r.memory->size() : 0; })
      .def("__repr__", [](const Region& r) {
        if (!r.h || !r.memory || r.core->closed) return std::string("<hmc.Region deregistered>");
        return "<hmc.Region " + std::to_string(r.memory->size()) + " bytes at " +
               hex(r.memory->ptr()) + ">";
      });
  bind_context_manager(region, &Region::deregister);

  py::class_<RemoteRegion, std::shared_ptr<RemoteRegion>> remote(
      m, "RemoteRegion", "A peer's region, imported from its descriptor (Peer.import_remote).");
  remote.def_readonly("size", &RemoteRegion::size, "The size of the remote region in bytes.")
      .def_readonly("peer", &RemoteRegion::peer)
      .def("release", &RemoteRegion::release, "Releases it; requests using it must have ended.");
  bind_context_manager(remote, &RemoteRegion::release);

  py::class_<TransferList, std::shared_ptr<TransferList>> list(
      m, "TransferList",
      "Ranges between a Region and a RemoteRegion (Context.prepare or Peer.prepare), checked\n"
      "and merged once, posted as one request as often as wanted.");
  list.def("post", &post, "notify"_a = py::none(),
           "Posts the whole list; with notify (an int, bytes, or (int, bytes)), the target\n"
           "receives that value and bytes through notify_wait after the last byte.")
      .def("release", &TransferList::release, "Frees the list; running posts keep what they need.")
      .def_readonly("count", &TransferList::count, "The number of descriptors given.")
      .def_readonly("total", &TransferList::total, "The bytes one post moves.")
      .def_property_readonly(
          "op", [](const TransferList& l) { return l.op == HMC_XFER_READ ? "read" : "write"; });
  bind_context_manager(list, &TransferList::release);

  py::class_<Peer, std::shared_ptr<Peer>> peer(m, "Peer", "A connection to another context.");
  peer.def("send", &send, "buf"_a, "tag"_a = 0, "Sends buf with a tag (below TAG_MAX).")
      .def("recv", &recv, "buf"_a, "tag"_a = 0,
           "Receives the next message of the tag into buf (writable).")
      .def("put", &put, "buf"_a, "remote"_a, "offset"_a = 0, "notify"_a = py::none(),
           "Writes buf into the remote region at offset; with notify (an int, bytes, or\n"
           "(int, bytes)), the target receives that value and bytes through notify_wait once\n"
           "the data is in place.")
      .def("notify", &notify_send, "value"_a = 0, "data"_a = py::bytes(),
           "Sends a notification without data: the target receives it through notify_wait\n"
           "after those of the earlier notifying puts and lists. The request ends once it is\n"
           "sent.")
      .def("get", &get, "buf"_a, "remote"_a, "offset"_a = 0,
           "Reads len(buf) bytes of the remote region at offset into buf (writable).")
      .def("import_remote", &import_remote, "desc"_a,
           "Imports a descriptor the peer packed (Region.pack); asks the peer whether it is live.")
      .def(
          "prepare",
          [](const std::shared_ptr<Peer>& self, py::object region, py::object remote, py::handle op,
             py::handle descs) {
            if (py::isinstance<RemoteRegion>(remote) && remote.cast<RemoteRegion&>().peer != self)
              fail(HMC_ERR_INVALID_ARGUMENT, "hmc_xfer_prepare",
                   "the remote region was imported from another peer");
            return prepare(std::move(region), std::move(remote), op, descs);
          },
          "region"_a, "remote"_a, "op"_a, "descs"_a, "Context.prepare, for a remote of this peer.")
      .def("info", &peer_info, "The chosen path and what is known of the peer, as a dict.")
      .def("close", &Peer::close, "Closes it: its pending requests end with CancelledError.")
      .def_property_readonly("closed",
                             [](const Peer& p) { return p.h == nullptr || p.core->closed; })
      .def("__repr__", [](const Peer& p) {
        if (p.h == nullptr || p.core->closed) return std::string("<hmc.Peer closed>");
        hmc_peer_info_t i{};
        i.struct_size = sizeof i;
        if (hmc_peer_info(p.h, &i) != HMC_SUCCESS) return std::string("<hmc.Peer>");
        return "<hmc.Peer pid " + std::to_string(i.remote_pid) + " on " + i.remote_host + " via " +
               i.path + (i.alive ? "" : ", lost") + ">";
      });
  bind_context_manager(peer, &Peer::close);

  py::class_<Core, std::shared_ptr<Core>> context(
      m, "Context",
      "An hmc context: plugins, devices, the control plane and a progress thread. Everything\n"
      "made from it keeps it alive; close() ends it at once, and them with it.");
  context
      .def(py::init([](std::optional<bool> progress_thread, std::optional<std::string> listen_host,
                       uint16_t listen_port) {
             return std::make_shared<Core>(progress_thread ? (*progress_thread ? 1 : 0) : -1,
                                           listen_host, listen_port);
           }),
           "progress_thread"_a = py::none(), "listen_host"_a = py::none(), "listen_port"_a = 0,
           "progress_thread: None follows HMC_PROGRESS_THREAD (on). listen_host, listen_port:\n"
           "the control plane's TCP address (None, 0: HMC_LISTEN_HOST, HMC_LISTEN_PORT).")
      .def(
          "address",
          [](const std::shared_ptr<Core>& self) {
            char buf[HMC_ADDRESS_MAX];
            size_t len = sizeof buf;
            check(hmc_address(self->handle("hmc_address"), buf, &len), "hmc_address");
            return to_bytes(buf, len);
          },
          "This context's address, for peers to connect to.")
      .def("connect", &connect, "addr"_a, "timeout_ms"_a = -1,
           "Connects to the context whose address is given (its accept runs at the same time).\n"
           "Ctrl-C is seen once it returns.")
      .def("accept", &accept, "timeout_ms"_a = -1, "Waits for the next peer to connect.")
      .def("alloc", &alloc, "device"_a, "size"_a,
           "Allocates size bytes on a device (\"host\", \"cuda:0\").")
      .def("copy", &copy, "dst"_a, "src"_a, "size"_a = py::none(),
           "Copies between any two local memories (size: all of src); blocks until done.")
      .def("register", &register_memory, "buf"_a,
           "access"_a = HMC_ACCESS_REMOTE_READ | HMC_ACCESS_REMOTE_WRITE,
           "Registers buf for peers' put (ACCESS_REMOTE_WRITE) and get (ACCESS_REMOTE_READ);\n"
           "the Region holds buf until deregistered.")
      .def(
          "prepare",
          [](const std::shared_ptr<Core>& self, py::object region, py::object remote, py::handle op,
             py::handle descs) {
            if (py::isinstance<Region>(region) && region.cast<Region&>().core != self)
              fail(HMC_ERR_INVALID_ARGUMENT, "hmc_xfer_prepare",
                   "the region belongs to another context");
            return prepare(std::move(region), std::move(remote), op, descs);
          },
          "region"_a, "remote"_a, "op"_a, "descs"_a,
          "A TransferList: op \"read\" (remote to local) or \"write\"; descs: (local_offset,\n"
          "remote_offset, size) triples, or an array of shape (N, 3) of uint64. A descriptor\n"
          "out of bounds raises OutOfBoundsError, and nothing is prepared.")
      .def("notify_wait", &notify_wait, "timeout_ms"_a = -1,
           "Takes the oldest notification delivered to this context.")
      .def(
          "event_fd",
          [](const std::shared_ptr<Core>& self) {
            int fd = -1;
            check(hmc_context_event_fd(self->handle("hmc_context_event_fd"), &fd),
                  "hmc_context_event_fd");
            return fd;
          },
          "A descriptor for event loops: readable once a request ended or a notification\n"
          "arrived after the last event_clear(). Needs the progress thread. Owned by the\n"
          "context: never read or close it. hmc.aio builds awaiting on it.")
      .def(
          "event_clear",
          [](const std::shared_ptr<Core>& self) {
            check(hmc_context_event_clear(self->handle("hmc_context_event_clear")),
                  "hmc_context_event_clear");
          },
          "Drains and re-arms event_fd(); test what you wait for after it, not before.")
      .def(
          "metrics",
          [](const std::shared_ptr<Core>& self) {
            hmc_context_t ctx = self->handle("hmc_metrics_dump");
            for (;;) {
              size_t len = 0;
              check(hmc_metrics_dump(ctx, nullptr, &len), "hmc_metrics_dump");
              std::string buf(len + 1024, '\0');
              len = buf.size();
              hmc_status_t st = hmc_metrics_dump(ctx, buf.data(), &len);
              if (st == HMC_ERR_TRUNCATED) continue;  // it grew between the two calls
              check(st, "hmc_metrics_dump");
              buf.resize(len ? len - 1 : 0);
              return buf;
            }
          },
          "The context's metrics in Prometheus' text format (docs/metrics.md).")
      .def("devices", &devices, "The devices hmc found, as dicts.")
      .def(
          "progress",
          [](const std::shared_ptr<Core>& self) {
            check(hmc_progress(self->handle("hmc_progress")), "hmc_progress");
          },
          "Drives progress once (only needed with progress_thread=False).")
      .def("close", &close_context,
           "Destroys the context now: its peers close, their requests end, its regions go.")
      .def("_close_if_idle", &close_context_if_idle,
           "close() unless a thread waits in hmc on the context or its memory is exported "
           "(then False, and it stays open): for an exit that must not wait.")
      .def_property_readonly("closed", [](const Core& c) { return c.closed; })
      .def_property_readonly(
          "timeout_ms", [](const Core& c) { return c.default_timeout_ms; },
          "What a timeout of -1 stands for (HMC_TIMEOUT_MS).");
  context.def("__repr__", [](const Core& c) {
    if (c.closed) return std::string("<hmc.Context closed>");
    size_t live = 0;
    for (const auto& kv : c.peers) live += !kv.second.expired();
    return "<hmc.Context, " + std::to_string(live) + " peer" + (live == 1 ? "" : "s") + ">";
  });
  context.def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](const std::shared_ptr<Core>& self, py::args) { close_context(self); });
  bind_comm(m);
  bind_log_forwarding(m);
  m.def("_at_exit", &at_exit,
        "Interpreter exit: threads coming back from hmc wait for the end instead of taking the "
        "GIL (registered with atexit by the package).");
}
