// hmc.Communicator: groups of ranks and their collectives, over hmc_comm_* and the collectives
// of hmc.h (docs/collectives.md). A collective returns an hmc.Request like a transfer; it holds
// both of its buffers until it ends.
#include <hmc/hmc.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "buffers.h"
#include "errors.h"
#include "objects.h"

namespace py = pybind11;
using namespace py::literals;

namespace hmcpy {
namespace {

struct Communicator {
  std::shared_ptr<Core> core;
  hmc_comm_t h = nullptr;

  ~Communicator() {
    // After Context.close() the context took its communicators with it.
    if (h && !core->closed) (void)hmc_comm_destroy(h);
  }
  hmc_comm_t handle(const char* call) const {
    core->handle(call);
    if (!h) fail(HMC_ERR_INVALID_HANDLE, call, "the communicator was destroyed");
    return h;
  }
  void destroy() {
    if (!h || core->closed) return;
    check(hmc_comm_destroy(std::exchange(h, nullptr)), "hmc_comm_destroy");
  }
  int rank() const {
    int r = 0;
    check(hmc_comm_rank(handle("hmc_comm_rank"), &r), "hmc_comm_rank");
    return r;
  }
  int size() const {
    int n = 0;
    check(hmc_comm_size(handle("hmc_comm_size"), &n), "hmc_comm_size");
    return n;
  }
};

struct DtypeName {
  const char* name;
  hmc_dtype_t dtype;
  size_t size;
};
constexpr DtypeName kDtypes[] = {
    {"float32", HMC_DTYPE_F32, 4},   {"float64", HMC_DTYPE_F64, 8}, {"float16", HMC_DTYPE_F16, 2},
    {"bfloat16", HMC_DTYPE_BF16, 2}, {"int8", HMC_DTYPE_I8, 1},     {"uint8", HMC_DTYPE_U8, 1},
    {"int32", HMC_DTYPE_I32, 4},     {"int64", HMC_DTYPE_I64, 8},
};

// The datatype: named ("float32", ... or a numpy dtype, whose str() is the name), else read from
// the buffer's format (numpy arrays, typed memoryviews). bfloat16 has no buffer format, an
// hmc.Memory (bytes, whatever it holds) none either: name it.
DtypeName resolve_dtype(py::handle dtype, py::handle buf, const char* call) {
  std::string name;
  if (!dtype.is_none()) {
    name = py::str(dtype);
  } else if (PyObject_CheckBuffer(buf.ptr()) && !py::isinstance<Memory>(buf)) {
    py::buffer_info info = py::reinterpret_borrow<py::buffer>(buf).request();
    std::string f = info.format;
    if (!f.empty() && (f[0] == '<' || f[0] == '=' || f[0] == '@')) f = f.substr(1);
    if (f == "f")
      name = "float32";
    else if (f == "d")
      name = "float64";
    else if (f == "e")
      name = "float16";
    else if (f == "b")
      name = "int8";
    else if (f == "B")
      name = "uint8";
    else if (f == "i")
      name = "int32";
    else if (f == "q" || (f == "l" && info.itemsize == 8))
      name = "int64";
    else
      fail(HMC_ERR_INVALID_ARGUMENT, call,
           "cannot tell the datatype from the buffer's format '" + f + "': pass dtype=");
  } else {
    fail(HMC_ERR_INVALID_ARGUMENT, call, "this buffer has no format: pass dtype=");
  }
  for (const DtypeName& d : kDtypes)
    if (name == d.name) return d;
  fail(HMC_ERR_INVALID_ARGUMENT, call,
       "unknown dtype '" + name +
           "' (float32, float64, float16, bfloat16, int8, uint8, int32, "
           "int64)");
}

hmc_reduce_op_t resolve_op(const std::string& op, const char* call) {
  if (op == "sum") return HMC_OP_SUM;
  if (op == "prod") return HMC_OP_PROD;
  if (op == "min") return HMC_OP_MIN;
  if (op == "max") return HMC_OP_MAX;
  if (op == "avg") return HMC_OP_AVG;
  if (op == "band") return HMC_OP_BAND;
  if (op == "bor") return HMC_OP_BOR;
  if (op == "bxor") return HMC_OP_BXOR;
  fail(HMC_ERR_INVALID_ARGUMENT, call,
       "unknown op '" + op + "' (sum, prod, min, max, avg; band, bor, bxor on integers)");
}

size_t elements(const Pinned& p, const DtypeName& d, const char* call, const char* what) {
  if (p.size() % d.size != 0)
    fail(HMC_ERR_INVALID_ARGUMENT, call,
         std::string(what) + " holds " + std::to_string(p.size()) +
             " bytes, not a whole number of " + d.name + " elements");
  return p.size() / d.size;
}

// A request holding the receive buffer, and the send buffer (when another) in `keep`.
std::shared_ptr<Request> make_request(const Communicator& c, hmc_request_t h,
                                      std::unique_ptr<Pinned> recv, std::unique_ptr<Pinned> send,
                                      const char* call) {
  py::object keep = py::none();
  if (send) {
    Pinned* raw = send.release();
    keep = py::capsule(raw, [](void* p) { delete static_cast<Pinned*>(p); });
  }
  return std::make_shared<Request>(c.core, nullptr, h, std::move(recv), std::move(keep), call);
}

// send and recv of a collective; recv None: in place, recv is send.
struct Buffers {
  std::unique_ptr<Pinned> send, recv;
  const void* send_ptr = nullptr;
  void* recv_ptr = nullptr;
};
Buffers pin(py::handle send, py::handle recv, const char* call) {
  Buffers b;
  if (recv.is_none()) {
    b.recv = Pinned::from(send, true, call);
    b.send_ptr = b.recv->ptr();
  } else {
    b.send = Pinned::from(send, false, call);
    b.recv = Pinned::from(recv, true, call);
    b.send_ptr = b.send->ptr();
  }
  b.recv_ptr = b.recv->ptr();
  return b;
}

// The application's stream (an int: torch.cuda.Stream.cuda_stream, a CUstream's address), as
// hmc_*_on_stream takes it.
void* as_stream(uintptr_t stream) {
  return reinterpret_cast<void*>(stream);
}

constexpr const char* kStreamDoc =
    "Every collective takes stream=: the application's CUDA/HIP stream as an int (torch's\n"
    "Stream.cuda_stream); the collective is then ordered after the work enqueued on it\n"
    "(hmc_*_on_stream, docs/collectives.md \"Stream order\"). 0: none.";

std::shared_ptr<Communicator> create(const std::shared_ptr<Core>& core, int rank, int size,
                                     std::optional<std::string> rendezvous, int timeout_ms) {
  const char* call = "hmc_comm_create";
  check_timeout(timeout_ms, call);
  hmc_comm_options_t o{};
  o.struct_size = sizeof o;
  o.rank = rank;
  o.size = size;
  o.rendezvous = rendezvous ? rendezvous->c_str() : nullptr;
  o.timeout_ms = timeout_ms;
  hmc_context_t ctx = core->handle(call);
  auto c = std::make_shared<Communicator>();
  c->core = core;
  hmc_status_t st;
  {
    Blocking b(*core, call);
    st = hmc_comm_create(ctx, &o, &c->h);
  }
  check(st, call);
  return c;
}

}  // namespace

void bind_comm(py::module_& m) {
  py::class_<Communicator, std::shared_ptr<Communicator>> comm(
      m, "Communicator",
      "A group of ranks (docs/collectives.md). Collectives return a Request; every rank calls\n"
      "the same collectives in the same order. dtype: float32, float64, float16, bfloat16,\n"
      "int8, uint8, int32, int64 (None: from the buffer's format); op: sum, prod, min, max, avg.");
  comm.def(py::init(&create), "context"_a, "rank"_a = -1, "size"_a = 0, "rendezvous"_a = py::none(),
           "timeout_ms"_a = -1,
           "Joins a group of `size` ranks at the rendezvous (\"tcp://host:port\", hosted by\n"
           "rank 0). rank -1, size 0, rendezvous None: HMC_RANK, HMC_WORLD_SIZE, HMC_RENDEZVOUS,\n"
           "else the launchers' variables (torchrun, Slurm, Open MPI). Blocks until every rank\n"
           "joined.")
      .def_property_readonly("rank", &Communicator::rank)
      .def_property_readonly("size", &Communicator::size)
      .def(
          "member",
          [](const Communicator& c, int rank) {
            hmc_comm_member_info_t info{};
            info.struct_size = sizeof info;
            check(hmc_comm_member_info(c.handle("hmc_comm_member_info"), rank, &info),
                  "hmc_comm_member_info");
            py::dict d;
            d["host"] = info.host;
            d["pid"] = info.pid;
            d["hostname"] = std::string(info.hostname);
            d["vendor"] = std::string(info.vendor);
            return d;
          },
          "rank"_a, "Where a rank runs: host number, hostname, pid, device vendor.")
      .def(
          "split",
          [](const Communicator& c, int color, int key) -> std::shared_ptr<Communicator> {
            hmc_comm_t out = nullptr;
            hmc_status_t st;
            hmc_comm_t h = c.handle("hmc_comm_split");
            {
              Blocking b(*c.core, "hmc_comm_split");
              st = hmc_comm_split(h, color, key, &out);
            }
            check(st, "hmc_comm_split");
            if (!out) return nullptr;
            auto n = std::make_shared<Communicator>();
            n->core = c.core;
            n->h = out;
            return n;
          },
          "color"_a, "key"_a = 0,
          "As MPI_Comm_split: the ranks of one color form a new communicator ordered by key;\n"
          "a negative color joins none (None). Every rank calls it.")
      .def(
          "barrier",
          [](const Communicator& c, uintptr_t stream) {
            hmc_request_t r = nullptr;
            if (stream)
              check(hmc_barrier_on_stream(c.handle("hmc_barrier"), as_stream(stream), &r),
                    "hmc_barrier_on_stream");
            else
              check(hmc_barrier(c.handle("hmc_barrier"), &r), "hmc_barrier");
            return make_request(c, r, nullptr, nullptr, "hmc_barrier");
          },
          "stream"_a = 0, kStreamDoc)
      .def(
          "broadcast",
          [](const Communicator& c, py::handle buf, int root, py::handle dtype, uintptr_t stream) {
            const char* call = "hmc_broadcast";
            DtypeName d = resolve_dtype(dtype, buf, call);
            auto p = Pinned::from(buf, true, call);
            size_t n = elements(*p, d, call, "buf");
            hmc_request_t r = nullptr;
            check(stream ? hmc_broadcast_on_stream(c.handle(call), p->ptr(), n, d.dtype, root,
                                                   as_stream(stream), &r)
                         : hmc_broadcast(c.handle(call), p->ptr(), n, d.dtype, root, &r),
                  call);
            return make_request(c, r, std::move(p), nullptr, call);
          },
          "buf"_a, "root"_a = 0, "dtype"_a = py::none(), "stream"_a = 0,
          "root's buf to every rank's buf.")
      .def(
          "all_reduce",
          [](const Communicator& c, py::handle send, py::handle recv, const std::string& op,
             py::handle dtype, uintptr_t stream) {
            const char* call = "hmc_all_reduce";
            DtypeName d = resolve_dtype(dtype, send, call);
            hmc_reduce_op_t o = resolve_op(op, call);
            Buffers b = pin(send, recv, call);
            size_t n = elements(*b.recv, d, call, "recv");
            if (b.send && b.send->size() != b.recv->size())
              fail(HMC_ERR_INVALID_ARGUMENT, call, "send and recv differ in size");
            hmc_request_t r = nullptr;
            check(stream
                      ? hmc_all_reduce_on_stream(c.handle(call), b.send_ptr, b.recv_ptr, n, d.dtype,
                                                 o, as_stream(stream), &r)
                      : hmc_all_reduce(c.handle(call), b.send_ptr, b.recv_ptr, n, d.dtype, o, &r),
                  call);
            return make_request(c, r, std::move(b.recv), std::move(b.send), call);
          },
          "send"_a, "recv"_a = py::none(), "op"_a = "sum", "dtype"_a = py::none(), "stream"_a = 0,
          "recv = the reduction of every rank's send (recv None: in place, into send).")
      .def(
          "reduce",
          [](const Communicator& c, py::handle send, py::handle recv, const std::string& op,
             int root, py::handle dtype, uintptr_t stream) {
            const char* call = "hmc_reduce";
            DtypeName d = resolve_dtype(dtype, send, call);
            hmc_reduce_op_t o = resolve_op(op, call);
            std::unique_ptr<Pinned> s, rv;
            const void* send_ptr;
            void* recv_ptr = nullptr;
            if (c.rank() == root && recv.is_none()) {  // in place
              rv = Pinned::from(send, true, call);
              send_ptr = recv_ptr = rv->ptr();
            } else {
              s = Pinned::from(send, false, call);
              send_ptr = s->ptr();
              if (!recv.is_none()) {
                rv = Pinned::from(recv, true, call);
                recv_ptr = rv->ptr();
                if (rv->size() != s->size())
                  fail(HMC_ERR_INVALID_ARGUMENT, call, "send and recv differ in size");
              }
            }
            size_t n = elements(s ? *s : *rv, d, call, "send");
            hmc_request_t r = nullptr;
            check(stream ? hmc_reduce_on_stream(c.handle(call), send_ptr, recv_ptr, n, d.dtype, o,
                                                root, as_stream(stream), &r)
                         : hmc_reduce(c.handle(call), send_ptr, recv_ptr, n, d.dtype, o, root, &r),
                  call);
            return make_request(c, r, std::move(rv), std::move(s), call);
          },
          "send"_a, "recv"_a = py::none(), "op"_a = "sum", "root"_a = 0, "dtype"_a = py::none(),
          "stream"_a = 0,
          "root's recv = the reduction of every rank's send. recv is the root's only: None there\n"
          "reduces in place, into send; the other ranks' send stays as it was and their recv\n"
          "(None or not) is never written.")
      .def(
          "all_gather",
          [](const Communicator& c, py::handle send, py::handle recv, py::handle dtype,
             uintptr_t stream) {
            const char* call = "hmc_all_gather";
            DtypeName d = resolve_dtype(dtype, send, call);
            auto s = Pinned::from(send, false, call);
            auto rv = Pinned::from(recv, true, call);
            size_t n = elements(*s, d, call, "send");
            hmc_request_t r = nullptr;
            check(stream ? hmc_all_gather_on_stream(c.handle(call), s->ptr(), rv->ptr(), n, d.dtype,
                                                    as_stream(stream), &r)
                         : hmc_all_gather(c.handle(call), s->ptr(), rv->ptr(), n, d.dtype, &r),
                  call);
            return make_request(c, r, std::move(rv), std::move(s), call);
          },
          "send"_a, "recv"_a, "dtype"_a = py::none(), "stream"_a = 0,
          "recv (size x len(send)) = every rank's send, in rank order.")
      .def(
          "all_to_all",
          [](const Communicator& c, py::handle send, py::handle recv, py::handle dtype,
             uintptr_t stream) {
            const char* call = "hmc_all_to_all";
            DtypeName d = resolve_dtype(dtype, send, call);
            auto s = Pinned::from(send, false, call);
            auto rv = Pinned::from(recv, true, call);
            size_t total = elements(*s, d, call, "send");
            size_t ranks = static_cast<size_t>(c.size());
            if (total % ranks != 0)
              fail(HMC_ERR_INVALID_ARGUMENT, call, "send is not size equal blocks");
            hmc_request_t r = nullptr;
            check(stream ? hmc_all_to_all_on_stream(c.handle(call), s->ptr(), rv->ptr(),
                                                    total / ranks, d.dtype, as_stream(stream), &r)
                         : hmc_all_to_all(c.handle(call), s->ptr(), rv->ptr(), total / ranks,
                                          d.dtype, &r),
                  call);
            return make_request(c, r, std::move(rv), std::move(s), call);
          },
          "send"_a, "recv"_a, "dtype"_a = py::none(), "stream"_a = 0,
          "Block j of send goes to rank j and lands as block `rank` of its recv.")
      .def(
          "all_to_allv",
          [](const Communicator& c, py::handle send, std::vector<size_t> send_counts,
             std::vector<size_t> send_displs, py::handle recv, std::vector<size_t> recv_counts,
             std::vector<size_t> recv_displs, py::handle dtype, uintptr_t stream) {
            const char* call = "hmc_all_to_allv";
            DtypeName d = resolve_dtype(dtype, send, call);
            size_t ranks = static_cast<size_t>(c.size());
            for (const auto* v : {&send_counts, &send_displs, &recv_counts, &recv_displs})
              if (v->size() != ranks)
                fail(HMC_ERR_INVALID_ARGUMENT, call,
                     "counts and displacements need one entry per rank (" + std::to_string(ranks) +
                         ")");
            auto s = Pinned::from(send, false, call);
            auto rv = Pinned::from(recv, true, call);
            hmc_request_t r = nullptr;
            check(stream ? hmc_all_to_allv_on_stream(c.handle(call), s->ptr(), send_counts.data(),
                                                     send_displs.data(), rv->ptr(),
                                                     recv_counts.data(), recv_displs.data(),
                                                     d.dtype, as_stream(stream), &r)
                         : hmc_all_to_allv(c.handle(call), s->ptr(), send_counts.data(),
                                           send_displs.data(), rv->ptr(), recv_counts.data(),
                                           recv_displs.data(), d.dtype, &r),
                  call);
            return make_request(c, r, std::move(rv), std::move(s), call);
          },
          "send"_a, "send_counts"_a, "send_displs"_a, "recv"_a, "recv_counts"_a, "recv_displs"_a,
          "dtype"_a = py::none(), "stream"_a = 0,
          "Counts and displacements in elements, one per rank; zero counts allowed.")
      .def(
          "reduce_scatter",
          [](const Communicator& c, py::handle send, py::handle recv, const std::string& op,
             py::handle dtype, uintptr_t stream) {
            const char* call = "hmc_reduce_scatter";
            DtypeName d = resolve_dtype(dtype, send, call);
            hmc_reduce_op_t o = resolve_op(op, call);
            auto s = Pinned::from(send, false, call);
            auto rv = Pinned::from(recv, true, call);
            size_t n = elements(*rv, d, call, "recv");
            hmc_request_t r = nullptr;
            check(stream
                      ? hmc_reduce_scatter_on_stream(c.handle(call), s->ptr(), rv->ptr(), n,
                                                     d.dtype, o, as_stream(stream), &r)
                      : hmc_reduce_scatter(c.handle(call), s->ptr(), rv->ptr(), n, d.dtype, o, &r),
                  call);
            return make_request(c, r, std::move(rv), std::move(s), call);
          },
          "send"_a, "recv"_a, "op"_a = "sum", "dtype"_a = py::none(), "stream"_a = 0,
          "recv = block `rank` of the reduction of every rank's send (size x len(recv)).")
      .def("destroy", &Communicator::destroy, "Frees the communicator now.");
}

}  // namespace hmcpy
