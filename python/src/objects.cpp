#include "objects.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "errors.h"

namespace py = pybind11;

namespace hmcpy {
namespace {

// Whether this thread may give the GIL up now: it holds it, and the interpreter is not being
// finalized (objects destroyed then are destroyed without releasing it).
bool can_release_gil() {
  return PyGILState_Check() && !finalizing();
}

// Runs fn without the GIL when that is allowed (destructors may run while it cannot be given up).
template <typename Fn>
void without_gil(Fn fn) {
  if (can_release_gil()) {
    py::gil_scoped_release released;
    fn();
  } else {
    fn();
  }
}

// A thread coming back from a Blocking scope once the interpreter is finalizing (a daemon
// thread waiting in hmc at exit) would be ended by Python with pthread_exit while it takes the
// GIL, inside a destructor, which aborts the process. Such threads wait for the exit instead,
// holding nothing of hmc's (as Python 3.14 makes them do itself). at_exit(), from atexit, says
// the exit began while Python still runs, and lets threads that were already taking the GIL
// have it before finalization starts: `exiting` and `reacquiring` are read crosswise (both
// sequentially consistent), so each such thread either sees the exit or is waited for.
std::atomic<bool> g_exiting{false};
std::atomic<int> g_reacquiring{0};

[[noreturn]] void park_until_exit() {
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

[[noreturn]] void fail_closed(const char* call, const char* what) {
  fail(HMC_ERR_INVALID_HANDLE, call, std::string("the ") + what + " was closed");
}

// HMC_TIMEOUT_MS as the context has it, which a timeout of -1 stands for.
int read_default_timeout(hmc_context_t ctx, int fallback) {
  int n = 0;
  if (hmc_config_count(ctx, &n) != HMC_SUCCESS) return fallback;
  for (int i = 0; i < n; ++i) {
    hmc_config_entry_t e{};
    e.struct_size = sizeof e;
    if (hmc_config_entry(ctx, i, &e) != HMC_SUCCESS) continue;
    if (std::strcmp(e.name, "HMC_TIMEOUT_MS") != 0) continue;
    try {
      return std::stoi(e.value);
    } catch (const std::exception&) {
      return fallback;
    }
  }
  return fallback;
}

}  // namespace

void check_timeout(int timeout_ms, const char* call) {
  if (timeout_ms < -1)
    fail(HMC_ERR_INVALID_ARGUMENT, call,
         "timeout_ms " + std::to_string(timeout_ms) +
             " is invalid (-1 for the context's default, 0 for none, or a positive number)");
}

// --- Core -----------------------------------------------------------------------------------

Core::Core(int progress_thread, const std::optional<std::string>& listen_host,
           uint16_t listen_port) {
  hmc_context_options_t o{};
  o.struct_size = sizeof o;
  o.progress_thread = progress_thread;
  o.listen_host = listen_host ? listen_host->c_str() : nullptr;
  o.listen_port = listen_port;
  hmc_status_t st;
  {
    py::gil_scoped_release released;  // loads plugins, may measure copy rates
    st = hmc_context_create(&o, &ctx);
  }
  check(st, "hmc_context_create");
  default_timeout_ms = read_default_timeout(ctx, default_timeout_ms);
}

Core::~Core() {
  try {
    close();
  } catch (...) {
  }
}

hmc_context_t Core::handle(const char* call) const {
  if (closed) fail_closed(call, "context");
  return ctx;
}

void Core::check_no_exports(const char* call) const {
  if (exported > 0)
    fail(HMC_ERR_INVALID_ARGUMENT, call,
         std::to_string(exported) +
             " buffer view(s) or DLPack tensor(s) of its hmc.Memory are alive (memoryview, "
             "numpy array, torch tensor); drop them first, as closing frees the memory");
}

void Core::close() {
  if (closed) return;
  check_no_exports("hmc_context_destroy");
  closed = true;
  hmc_context_t c = std::exchange(ctx, nullptr);
  hmc_status_t st = HMC_SUCCESS;
  without_gil([&] {
    std::unique_lock<std::mutex> lock(mutex);
    idle.wait(lock, [&] { return blocking == 0; });
    st = hmc_context_destroy(c);
  });
  peers.clear();
  check(st, "hmc_context_destroy");
}

Blocking::Blocking(Core& core, const char* call) : core_(core) {
  core.handle(call);
  {
    std::lock_guard<std::mutex> lock(core.mutex);
    ++core.blocking;
  }
  if (can_release_gil()) released_.emplace();
}

Blocking::~Blocking() {
  {
    std::lock_guard<std::mutex> lock(core_.mutex);
    --core_.blocking;
  }
  core_.idle.notify_all();
  if (!released_) return;
  ++g_reacquiring;
  if (g_exiting || finalizing()) {
    --g_reacquiring;
    park_until_exit();
  }
  released_.reset();
  --g_reacquiring;
}

void at_exit() {
  g_exiting = true;
  if (g_reacquiring == 0) return;
  py::gil_scoped_release released;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (g_reacquiring > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// --- Memory ---------------------------------------------------------------------------------

Memory::~Memory() {
  if (ptr && !core->closed) (void)hmc_mem_free(core->ctx, ptr);
}

void Memory::free() {
  if (!ptr) return;
  if (pins > 0)
    fail(HMC_ERR_INVALID_ARGUMENT, "hmc_mem_free",
         "the memory is used by " + std::to_string(pins) +
             " pending request(s) or region(s); end them first");
  if (exports > 0)
    fail(HMC_ERR_INVALID_ARGUMENT, "hmc_mem_free",
         "the memory is exported to " + std::to_string(exports) +
             " buffer view(s) or DLPack tensor(s) (memoryview, numpy array, torch tensor); drop "
             "them first");
  hmc_context_t c = core->handle("hmc_mem_free");
  check(hmc_mem_free(c, ptr), "hmc_mem_free");
  ptr = nullptr;
}

// --- Peer -----------------------------------------------------------------------------------

Peer::~Peer() {
  try {
    close();
  } catch (...) {
  }
}

hmc_peer_t Peer::handle(const char* call) const {
  if (!h) fail_closed(call, "peer");
  core->handle(call);
  return h;
}

void Peer::close() {
  if (!h || core->closed) {
    h = nullptr;
    return;
  }
  hmc_peer_t p = std::exchange(h, nullptr);
  core->peers.erase(p);
  hmc_status_t st;
  {
    Blocking b(*core, "hmc_peer_close");
    st = hmc_peer_close(p);
  }
  check(st, "hmc_peer_close");
}

// --- Region, RemoteRegion --------------------------------------------------------------------

Region::~Region() {
  try {
    deregister();
  } catch (...) {
  }
}

hmc_region_t Region::handle(const char* call) const {
  if (!h) fail(HMC_ERR_INVALID_HANDLE, call, "the region was deregistered");
  core->handle(call);
  return h;
}

void Region::deregister() {
  if (!h || core->closed) {
    h = nullptr;
    memory.reset();
    return;
  }
  hmc_region_t r = std::exchange(h, nullptr);
  hmc_status_t st;
  {
    // Waits for peers' operations on the region to end.
    Blocking b(*core, "hmc_mem_deregister");
    st = hmc_mem_deregister(r);
  }
  if (st == HMC_SUCCESS) memory.reset();
  check(st, "hmc_mem_deregister");
}

RemoteRegion::~RemoteRegion() {
  try {
    release();
  } catch (...) {
  }
}

hmc_remote_t RemoteRegion::handle(const char* call) const {
  if (!h) fail(HMC_ERR_INVALID_HANDLE, call, "the remote region was released");
  peer->core->handle(call);
  return h;
}

void RemoteRegion::release() {
  if (!h || peer->core->closed) {
    h = nullptr;
    return;
  }
  check(hmc_remote_release(std::exchange(h, nullptr)), "hmc_remote_release");
}

// --- Request --------------------------------------------------------------------------------

Request::Request(std::shared_ptr<Core> core, std::shared_ptr<Peer> peer, hmc_request_t h,
                 std::unique_ptr<Pinned> buffer, py::object keep, const char* call)
    : core(std::move(core)),
      peer(std::move(peer)),
      h(h),
      buffer(std::move(buffer)),
      keep(std::move(keep)),
      call(call) {}

Request::~Request() {
  if (ended || core->closed) return;
  // The buffer must not be released while hmc may still touch it: cancel, and wait for the end.
  // A collective (no peer) is let finish first, as a dropped torch Work is: cancelling it would
  // break its communicator. One still running after the whole timeout is cancelled.
  hmc_status_t st = HMC_SUCCESS;
  try {
    Blocking b(*core, "hmc_request_wait");
    if (peer) (void)hmc_request_cancel(h);
    st = hmc_request_wait(h, -1, nullptr);
    if (!peer && (st == HMC_ERR_TIMEOUT || st == HMC_IN_PROGRESS)) {
      (void)hmc_request_cancel(h);
      st = hmc_request_wait(h, -1, nullptr);
    }
  } catch (...) {
  }
  if (st == HMC_ERR_TIMEOUT || st == HMC_IN_PROGRESS) {
    // Still running after the context's whole timeout: leaking the buffer is the lesser harm.
    (void)buffer.release();
    (void)keep.release();
  }
}

size_t Request::outcome() const {
  if (status != HMC_SUCCESS) throw Failure{status, message};
  return bytes;
}

size_t Request::finish(hmc_status_t st, size_t moved, const char* op) {
  std::string detail = st == HMC_SUCCESS ? "" : hmc_last_error();
  return end(st, moved,
             std::string(op) + " (" + call + "): " + hmc_status_string(st) +
                 (detail.empty() ? "" : ": " + detail));
}

size_t Request::end_with_context() {
  // hmc_context_destroy ended the request, and its handle with it.
  return end(HMC_ERR_CANCELLED, 0,
             std::string("hmc_request_wait (") + call +
                 "): HMC_ERR_CANCELLED: the context was closed while the request ran");
}

size_t Request::end(hmc_status_t st, size_t moved, std::string text) {
  ended = true;
  status = st;
  bytes = moved;
  if (st != HMC_SUCCESS) message = std::move(text);
  buffer.reset();
  keep = py::object();
  peer.reset();
  return outcome();
}

size_t Request::wait(int timeout_ms) {
  if (ended) return outcome();
  check_timeout(timeout_ms, "hmc_request_wait");
  if (busy)
    fail(HMC_ERR_INVALID_ARGUMENT, "hmc_request_wait", "another thread waits on the request");
  if (core->closed) return end_with_context();
  busy = true;
  struct Unbusy {
    bool& b;
    ~Unbusy() { b = false; }
  } unbusy{busy};
  size_t moved = 0;
  hmc_status_t st;
  try {
    st = wait_sliced(*core, timeout_ms, "hmc_request_wait",
                     [&](int slice) { return hmc_request_wait(h, slice, &moved); });
  } catch (const Failure&) {
    // The context was closed by another thread while this one waited: the request went with it.
    if (!core->closed) throw;
    return end_with_context();
  }
  if (st == HMC_ERR_TIMEOUT) {
    const int total = timeout_ms < 0 ? core->default_timeout_ms : timeout_ms;
    fail(HMC_ERR_TIMEOUT, "hmc_request_wait",
         std::string("the ") + call + " request did not end within " + std::to_string(total) +
             " ms; it is still pending (wait again, or cancel it)");
  }
  return finish(st, moved, "hmc_request_wait");
}

std::optional<size_t> Request::test() {
  if (ended) return outcome();
  if (busy)
    fail(HMC_ERR_INVALID_ARGUMENT, "hmc_request_test", "another thread waits on the request");
  if (core->closed) return end_with_context();
  size_t moved = 0;
  hmc_status_t st = hmc_request_test(h, &moved);
  if (st == HMC_IN_PROGRESS || st == HMC_ERR_TIMEOUT) return std::nullopt;
  return finish(st, moved, "hmc_request_test");
}

bool Request::cancel() {
  if (ended) return false;
  if (busy)
    fail(HMC_ERR_INVALID_ARGUMENT, "hmc_request_cancel", "another thread waits on the request");
  core->handle("hmc_request_cancel");
  hmc_status_t st = hmc_request_cancel(h);
  if (st == HMC_ERR_NOT_SUPPORTED) return false;
  check(st, "hmc_request_cancel");
  return true;
}

// --- TransferList ---------------------------------------------------------------------------

TransferList::~TransferList() {
  try {
    release();
  } catch (...) {
  }
}

hmc_xfer_list_t TransferList::handle(const char* call) const {
  if (!h) fail(HMC_ERR_INVALID_HANDLE, call, "the transfer list was released");
  core->handle(call);
  return h;
}

void TransferList::release() {
  if (!h || core->closed) {
    h = nullptr;
    return;
  }
  check(hmc_xfer_release(std::exchange(h, nullptr)), "hmc_xfer_release");
}

hmc_xfer_op_t parse_op(py::handle op) {
  if (py::isinstance<py::str>(op)) {
    std::string s = op.cast<std::string>();
    if (s == "read") return HMC_XFER_READ;
    if (s == "write") return HMC_XFER_WRITE;
  }
  fail(HMC_ERR_INVALID_ARGUMENT, "hmc_xfer_prepare",
       "op must be \"read\" (remote to local) or \"write\" (local to remote), not " +
           py::repr(op).cast<std::string>());
}

std::vector<hmc_xfer_desc_t> parse_descriptors(py::handle descs) {
  static_assert(sizeof(hmc_xfer_desc_t) == 3 * sizeof(uint64_t), "descriptors are 3 uint64");
  const char* call = "hmc_xfer_prepare";
  std::vector<hmc_xfer_desc_t> out;
  if (PyObject_CheckBuffer(descs.ptr())) {
    Py_buffer v;
    if (PyObject_GetBuffer(descs.ptr(), &v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0) {
      PyErr_Clear();
      fail(HMC_ERR_INVALID_ARGUMENT, call, "the descriptor array must be C-contiguous");
    }
    struct Release {
      Py_buffer* v;
      ~Release() { PyBuffer_Release(v); }
    } release{&v};
    std::string fmt = v.format ? v.format : "B";
    if (!fmt.empty() && (fmt[0] == '@' || fmt[0] == '=' || fmt[0] == '<')) fmt.erase(0, 1);
    const bool is_unsigned = fmt == "Q" || fmt == "L";
    const bool is_signed = fmt == "q" || fmt == "l";
    if (v.ndim != 2 || v.shape[1] != 3 || v.itemsize != 8 || !(is_unsigned || is_signed))
      fail(HMC_ERR_INVALID_ARGUMENT, call,
           "the descriptor array must have shape (N, 3) and 64-bit integers (uint64 or int64), "
           "rows of (local_offset, remote_offset, size)");
    const size_t n = static_cast<size_t>(v.shape[0]);
    out.resize(n);
    if (n) std::memcpy(out.data(), v.buf, n * sizeof(hmc_xfer_desc_t));
    if (is_signed) {
      const int64_t* s = static_cast<const int64_t*>(v.buf);
      for (size_t i = 0; i < 3 * n; ++i)
        if (s[i] < 0)
          fail(HMC_ERR_INVALID_ARGUMENT, call,
               "descriptor " + std::to_string(i / 3) + " has a negative value");
    }
    return out;
  }
  if (!py::isinstance<py::sequence>(descs) || py::isinstance<py::str>(descs))
    fail(HMC_ERR_INVALID_ARGUMENT, call,
         "descriptors must be a sequence of (local_offset, remote_offset, size) or an array of "
         "shape (N, 3)");
  py::sequence seq = py::reinterpret_borrow<py::sequence>(descs);
  out.reserve(seq.size());
  size_t i = 0;
  for (py::handle item : seq) {
    try {
      auto t = item.cast<std::tuple<uint64_t, uint64_t, uint64_t>>();
      out.push_back({std::get<0>(t), std::get<1>(t), std::get<2>(t)});
    } catch (const py::cast_error&) {
      fail(HMC_ERR_INVALID_ARGUMENT, call,
           "descriptor " + std::to_string(i) +
               " is not three non-negative integers (local_offset, remote_offset, size): " +
               py::repr(item).cast<std::string>());
    }
    ++i;
  }
  return out;
}

std::shared_ptr<TransferList> prepare_list(py::object region, py::object remote, py::handle op,
                                           py::handle descs) {
  const char* call = "hmc_xfer_prepare";
  auto& local = region.cast<Region&>();
  auto& rem = remote.cast<RemoteRegion&>();
  auto list = std::make_shared<TransferList>();
  list->op = parse_op(op);
  std::vector<hmc_xfer_desc_t> d = parse_descriptors(descs);
  if (list->op == HMC_XFER_READ && local.memory && !local.memory->writable())
    fail(HMC_ERR_INVALID_ARGUMENT, call,
         "a read lands in the local region, whose buffer is read-only");
  hmc_region_t lh = local.handle(call);
  hmc_remote_t rh = rem.handle(call);
  check(hmc_xfer_prepare(lh, rh, list->op, d.data(), d.size(), &list->h), call);
  list->core = local.core;
  list->peer = rem.peer;
  list->region = std::move(region);
  list->remote = std::move(remote);
  list->count = d.size();
  for (const auto& x : d) list->total += x.size;
  return list;
}

}  // namespace hmcpy
