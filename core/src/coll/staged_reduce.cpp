#include "coll/staged_reduce.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "coll/reduce.h"
#include "coll/schedule.h"
#include "device/backoff.h"
#include "device/copy.h"
#include "device/registry.h"
#include "device/stage_pool.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/status.h"

namespace hmc::coll {

// The reduce slot takes hmc.h's values unchanged.
static_assert(HMC_DEVICE_DTYPE_F32 == HMC_DTYPE_F32 && HMC_DEVICE_DTYPE_F64 == HMC_DTYPE_F64 &&
                  HMC_DEVICE_DTYPE_F16 == HMC_DTYPE_F16 &&
                  HMC_DEVICE_DTYPE_BF16 == HMC_DTYPE_BF16 && HMC_DEVICE_DTYPE_I8 == HMC_DTYPE_I8 &&
                  HMC_DEVICE_DTYPE_U8 == HMC_DTYPE_U8 && HMC_DEVICE_DTYPE_I32 == HMC_DTYPE_I32 &&
                  HMC_DEVICE_DTYPE_I64 == HMC_DTYPE_I64,
              "device.h's datatypes are hmc_dtype_t's");
static_assert(HMC_DEVICE_REDUCE_SUM == HMC_OP_SUM && HMC_DEVICE_REDUCE_PROD == HMC_OP_PROD &&
                  HMC_DEVICE_REDUCE_MIN == HMC_OP_MIN && HMC_DEVICE_REDUCE_MAX == HMC_OP_MAX,
              "device.h's operations are hmc_reduce_op_t's");

namespace {

struct Job {
  DeviceRegistry& devices;
  CopyEngine& engine;
  const Device* on;  // dst's device (host when dst is host memory)
  uint8_t* dst;
  MemoryLocation dl;
  const uint8_t* src;
  MemoryLocation sl;
  MemoryLocation host;
  size_t count, bytes, es;
  hmc_dtype_t dtype;
  hmc_reduce_op_t op;
  uint64_t deadline;
  int timeout_ms;

  hmc_status_t timed_out(const char* how) const {
    return fail(HMC_ERR_TIMEOUT,
                "reduction of {} elements into {} ({}): not done after {} ms (HMC_TIMEOUT_MS)",
                count, dl.device->name, how, timeout_ms);
  }
  uint32_t device_op() const {
    return op == HMC_OP_AVG ? HMC_DEVICE_REDUCE_SUM : static_cast<uint32_t>(op);
  }
  // Piece size: the staging chunk, in whole elements.
  size_t piece() const {
    size_t c = devices.copy_settings().stage_chunk;
    return std::max(es, c - c % es);
  }
  size_t slots(size_t pieces) const {
    return std::min<size_t>(std::max(devices.copy_settings().stage_depth, 2), pieces);
  }
};

// src on dst's device: one reduction there.
hmc_status_t on_device(const Job& j) {
  CopyJob job;
  hmc_status_t st =
      j.engine.start_reduce(j.on, j.dst, j.dst, j.src, j.count, static_cast<uint32_t>(j.dtype),
                            j.device_op(), j.bytes, &job);
  if (st != HMC_SUCCESS) return st;
  Backoff backoff;
  while ((st = job.poll()) == HMC_IN_PROGRESS) {
    if (now_ns() > j.deadline) return j.timed_out("on the device");
    backoff.pause();
  }
  return st;
}

// src in host memory: pieces go up into a device buffer, the device reduces each.
// HMC_ERR_NOT_SUPPORTED (the plugin declines) and HMC_ERR_NO_MEMORY (no device buffer) leave dst
// untouched.
hmc_status_t uploading(const Job& j) {
  const size_t piece = j.piece(), pieces = (j.bytes + piece - 1) / piece;
  const size_t nslots = j.slots(pieces);
  void* buf = nullptr;
  hmc_status_t st = j.devices.alloc(j.on->name, nslots * piece, &buf);
  if (st != HMC_SUCCESS) return st;
  const MemoryLocation bl = j.devices.locate(buf);
  struct Slot {
    size_t off = 0, len = 0;
    uint8_t* dev = nullptr;
    int phase = 0;  // 0 idle, 1 going up, 2 reducing
    CopyJob job;
  };
  std::vector<Slot> slots(nslots);
  for (size_t i = 0; i < nslots; ++i) slots[i].dev = static_cast<uint8_t*>(buf) + i * piece;
  size_t issued = 0, reduced = 0;
  bool started = false;  // a reduction was enqueued: dst is no longer untouched
  Backoff backoff;
  while (st == HMC_SUCCESS && reduced < pieces) {
    bool moved = false;
    for (Slot& s : slots) {
      if (st != HMC_SUCCESS) break;
      if (s.phase == 0 && issued < pieces) {
        s.off = issued * piece;
        s.len = std::min(piece, j.bytes - s.off);
        st = j.engine.start(s.dev, bl, j.src + s.off, j.host, s.len, &s.job);
        if (st != HMC_SUCCESS) break;
        s.phase = 1;
        ++issued;
        moved = true;
      }
      if (s.phase == 1) {
        hmc_status_t p = s.job.poll();
        if (p == HMC_IN_PROGRESS) continue;
        if ((st = p) != HMC_SUCCESS) break;
        st = j.engine.start_reduce(j.on, j.dst + s.off, j.dst + s.off, s.dev, s.len / j.es,
                                   static_cast<uint32_t>(j.dtype), j.device_op(), s.len, &s.job);
        if (st == HMC_ERR_NOT_SUPPORTED && started)
          st = fail(HMC_ERR_PLUGIN,
                    "reduction on {}: the plugin declined a piece after "
                    "reducing others of the same datatype and operation",
                    j.on->name);
        if (st != HMC_SUCCESS) break;
        started = true;
        s.phase = 2;
        moved = true;
      }
      if (s.phase == 2) {
        hmc_status_t p = s.job.poll();
        if (p == HMC_IN_PROGRESS) continue;
        if ((st = p) != HMC_SUCCESS) break;
        s.phase = 0;
        ++reduced;
        moved = true;
      }
    }
    if (st != HMC_SUCCESS || reduced == pieces) break;
    if (moved) {
      backoff.reset();
    } else {
      if (now_ns() > j.deadline) st = j.timed_out("on the device, uploading pieces");
      backoff.pause();
    }
  }
  // The buffer goes back only once nothing on the device uses it any more.
  const std::string error = st != HMC_SUCCESS ? last_error() : std::string();
  bool busy = false;
  for (Slot& s : slots)
    if (s.job.active() && s.job.wait(CopyEngine::kDropWaitMs) == HMC_ERR_TIMEOUT) busy = true;
  if (busy)
    HMC_LOG_W("reduction on {}: a copy or reduction did not end; its {} byte buffer is kept",
              j.on->name, nslots * piece);
  else
    j.devices.free(buf);
  if (st != HMC_SUCCESS) set_error(st, error);
  return st;
}

// Pieces through pinned host buffers: in, reduced by the host, back out.
hmc_status_t staged(const Job& j) {
  StagePool& pool = j.devices.stage_pool();
  const bool dst_dev = !j.dl.device->is_host(), src_dev = !j.sl.device->is_host();
  const size_t piece = std::min(j.piece(), pool.chunk() - pool.chunk() % j.es);
  const size_t pieces = (j.bytes + piece - 1) / piece;
  struct Slot {
    size_t off = 0, len = 0;
    void* hd = nullptr;  // dst's piece, when dst is device memory
    void* hs = nullptr;  // src's piece, when src is device memory
    int phase = 0;       // 0 idle, 1 coming in, 2 going back
    CopyJob in_d, in_s, out;
  };
  std::vector<Slot> slots(j.slots(pieces));
  size_t issued = 0, done = 0;
  hmc_status_t st = HMC_SUCCESS;
  Backoff backoff;
  while (st == HMC_SUCCESS && done < pieces) {
    bool moved = false;
    for (Slot& s : slots) {
      if (st != HMC_SUCCESS) break;
      if (s.phase == 0 && issued < pieces) {
        // The pool is shared with every transfer of the context: when it is all in use, the
        // piece waits for a later round.
        if ((dst_dev && !s.hd && !(s.hd = pool.take())) ||
            (src_dev && !s.hs && !(s.hs = pool.take())))
          continue;
        s.off = issued * piece;
        s.len = std::min(piece, j.bytes - s.off);
        if (dst_dev) st = j.engine.start(s.hd, j.host, j.dst + s.off, j.dl, s.len, &s.in_d);
        if (st == HMC_SUCCESS && src_dev)
          st = j.engine.start(s.hs, j.host, j.src + s.off, j.sl, s.len, &s.in_s);
        if (st != HMC_SUCCESS) break;
        s.phase = 1;
        ++issued;
        moved = true;
      }
      if (s.phase == 1) {
        hmc_status_t p = s.in_d.poll();
        if (p == HMC_SUCCESS) p = s.in_s.poll();
        if (p == HMC_IN_PROGRESS) continue;
        if ((st = p) != HMC_SUCCESS) break;
        void* d = dst_dev ? s.hd : j.dst + s.off;
        const void* from = src_dev ? s.hs : j.src + s.off;
        if ((st = reduce_into(d, from, s.len / j.es, j.dtype, j.op)) != HMC_SUCCESS) break;
        if (s.hs) {
          pool.give(s.hs);
          s.hs = nullptr;
        }
        moved = true;
        if (!dst_dev) {
          s.phase = 0;
          ++done;
          continue;
        }
        if ((st = j.engine.start(j.dst + s.off, j.dl, s.hd, j.host, s.len, &s.out)) != HMC_SUCCESS)
          break;
        s.phase = 2;
      }
      if (s.phase == 2) {
        hmc_status_t p = s.out.poll();
        if (p == HMC_IN_PROGRESS) continue;
        if ((st = p) != HMC_SUCCESS) break;
        s.phase = 0;
        ++done;
        moved = true;
      }
    }
    if (st != HMC_SUCCESS || done == pieces) break;
    if (moved) {
      backoff.reset();
    } else {
      if (now_ns() > j.deadline) st = j.timed_out("staged through host memory");
      backoff.pause();
    }
  }
  // Buffers a copy still uses go back with it (CopyJob::adopt_stage_buffer), the others now.
  for (Slot& s : slots) {
    CopyJob* holds_d = s.out.active() ? &s.out : s.in_d.active() ? &s.in_d : nullptr;
    if (s.hd && holds_d)
      holds_d->adopt_stage_buffer(s.hd);
    else if (s.hd)
      pool.give(s.hd);
    if (s.hs && s.in_s.active())
      s.in_s.adopt_stage_buffer(s.hs);
    else if (s.hs)
      pool.give(s.hs);
  }
  return st;
}

}  // namespace

hmc_status_t reduce_memory(DeviceRegistry& devices, void* dst, const void* src, size_t count,
                           hmc_dtype_t dtype, hmc_reduce_op_t op, ReducedOn* how) {
  const size_t es = dtype_size(dtype);
  if (es == 0 || !valid_op_for(dtype, op))
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "reduction: operation {} ({}) on datatype {} ({}) is "
                "not defined",
                reduce_op_name(op), static_cast<int>(op), dtype_name(dtype),
                static_cast<int>(dtype));
  MemoryLocation dl = devices.locate(dst), sl = devices.locate(src);
  if (dl.device->is_host() && sl.device->is_host()) {
    if (how) *how = ReducedOn::Host;
    return reduce_into(dst, src, count, dtype, op);
  }
  const size_t bytes = count * es;
  hmc_status_t st = DeviceRegistry::check_range("reduction", dst, dl, bytes);
  if (st == HMC_SUCCESS) st = DeviceRegistry::check_range("reduction", src, sl, bytes);
  if (st != HMC_SUCCESS || count == 0) return st;
  const int timeout_ms = devices.copy_settings().timeout_ms;
  MemoryLocation host;
  host.device = &devices.devices().front();
  Job j{devices,   devices.copy_engine(),
        dl.device, static_cast<uint8_t*>(dst),
        dl,        static_cast<const uint8_t*>(src),
        sl,        host,
        count,     bytes,
        es,        dtype,
        op,        deadline_after_ms(timeout_ms),
        timeout_ms};
  const Device* on = dl.device;
  // device.h has no bitwise operations: those are reduced on the host.
  if (!on->is_host() && !bitwise_op(op) && HMC_DEVICE_SLOT(on->plugin, reduce) &&
      (sl.device == on || sl.device->is_host())) {
    st = sl.device == on ? on_device(j) : uploading(j);
    if (st != HMC_ERR_NOT_SUPPORTED && st != HMC_ERR_NO_MEMORY) {
      if (how) *how = ReducedOn::Device;
      HMC_LOG_T("reduced {} elements into {} on the device", count, on->name);
      return st;
    }
    // Nothing was reduced yet: the host does it.
    HMC_LOG_D("reduction of {} elements on {}: {}; staged through host memory instead", count,
              on->name, last_error());
  }
  if (how) *how = ReducedOn::Staged;
  HMC_LOG_T("reducing {} elements from {} into {} staged through host memory", count,
            sl.device->name, dl.device->name);
  return staged(j);
}

}  // namespace hmc::coll
