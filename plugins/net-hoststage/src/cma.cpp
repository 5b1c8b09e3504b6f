// Cross-memory attach on the shm device: the side that owns the destination (a receive buffer,
// or a registered region for put) or the source (a region for get) copies the bytes itself with
// process_vm_readv/process_vm_writev, one chunk per step, so only the owner touches its memory
// and the data moves with a single copy.
//
// When the kernel refuses (EPERM: ptrace restrictions such as Yama scope or a non-dumpable peer;
// ENOSYS: no CMA), the transfer falls back to streaming over the endpoint's Unix socket, the same
// CTS/DATA path tcp uses, and the endpoint stops trying CMA. The first such failure of a context
// is logged at warn level with the reason.
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>

#include "context.h"
#include "endpoint.h"

namespace hmc::hoststage {

void Endpoint::run_cma() {
  const size_t chunk = ctx_.cfg().shm_chunk;
  size_t budget = 2 * chunk;  // per progress call
  while (!cma_.empty() && !failed()) {
    CmaJob& j = cma_.front();
    size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, j.len - j.done));
    uint8_t* local = j.local + j.done;
    if (j.key != 0) {
      // The owner re-checks its region before every step: a deregistration stops the copy.
      uint32_t need =
          j.kind == CmaJob::kPutPull ? HMC_NET_ACCESS_REMOTE_WRITE : HMC_NET_ACCESS_REMOTE_READ;
      if (!ctx_.regions().check_local(j.key, local, n, need)) {
        CmaJob done = j;
        cma_.pop_front();
        finish_cma(done, HMC_PLUGIN_ERR_REMOTE, HMC_PLUGIN_ERR_REMOTE);
        continue;
      }
    }
    iovec liov{local, n};
    iovec riov{reinterpret_cast<void*>(static_cast<uintptr_t>(j.remote + j.done)), n};
    ssize_t got = j.kind == CmaJob::kGetPush ? ::process_vm_writev(peer_pid_, &liov, 1, &riov, 1, 0)
                                             : ::process_vm_readv(peer_pid_, &liov, 1, &riov, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      int err = got < 0 ? errno : EFAULT;
      CmaJob done = j;
      cma_.pop_front();
      if (err == EPERM || err == ENOSYS || err == EACCES) {
        cma_fallback(done, err);
      } else if (err == ESRCH) {
        fail(HMC_PLUGIN_ERR_PEER_LOST, "process %d is gone (cross-memory copy)",
             static_cast<int>(peer_pid_));
        return;
      } else {
        // EFAULT: the peer's buffer is not mapped in the peer. The peer passed a bad buffer.
        HS_WARN(ctx_.log(), "%s: cross-memory copy of %llu bytes at 0x%llx failed: %s",
                name_.c_str(), static_cast<unsigned long long>(done.len),
                static_cast<unsigned long long>(done.remote), errno_text(err).c_str());
        finish_cma(done, HMC_PLUGIN_ERR_REMOTE, HMC_PLUGIN_ERR_INVALID_ARGUMENT);
      }
      continue;
    }
    j.done += static_cast<uint64_t>(got);
    if (j.done == j.len) {
      CmaJob done = j;
      cma_.pop_front();
      finish_cma(done, HMC_PLUGIN_SUCCESS, HMC_PLUGIN_SUCCESS);
    }
    if (static_cast<size_t>(got) >= budget) break;
    budget -= static_cast<size_t>(got);
  }
  if (!cma_.empty()) ctx_.note_more_work();
}

void Endpoint::finish_cma(const CmaJob& j, hmc_plugin_status_t local_st,
                          hmc_plugin_status_t peer_st) {
  switch (j.kind) {
    case CmaJob::kRecvPull: {
      Request* r = j.req;
      hmc_plugin_status_t st = local_st;
      if (st == HMC_PLUGIN_SUCCESS && r->msg_len > r->len) st = HMC_PLUGIN_ERR_TRUNCATED;
      WireHdr h{};
      h.type = kMsgFin;
      h.id = j.peer_id;
      h.status = static_cast<int16_t>(peer_st);
      send_ctrl(h, nullptr, 0, nullptr);
      complete(r, st, local_st == HMC_PLUGIN_SUCCESS ? static_cast<size_t>(j.len) : 0);
      break;
    }
    case CmaJob::kPutPull:
      notes_.landed(j.note, peer_st == HMC_PLUGIN_SUCCESS);
      reply(kMsgPutAck, j.peer_id, peer_st);
      break;
    case CmaJob::kGetPush: reply(kMsgGetResp, j.peer_id, peer_st); break;
  }
}

void Endpoint::cma_fallback(const CmaJob& j, int err) {
  cma_ok_ = false;
  const char* why = err == ENOSYS ? "the kernel lacks cross-memory attach"
                                  : "ptrace access to the peer is denied (Yama ptrace_scope, "
                                    "a non-dumpable peer, or missing CAP_SYS_PTRACE)";
  if (ctx_.first_cma_failure()) {
    HS_WARN(ctx_.log(),
            "%s: cross-memory copy failed: %s: %s; bulk data on shm endpoints now streams over "
            "the Unix socket (one extra copy)",
            name_.c_str(), errno_text(err).c_str(), why);
  } else {
    HS_DEBUG(ctx_.log(), "%s: cross-memory copy failed (%s); streaming over the socket",
             name_.c_str(), errno_text(err).c_str());
  }
  switch (j.kind) {
    case CmaJob::kRecvPull: {
      uint64_t sid = next_id_++;
      sinks_[sid] = Sink{SinkKind::kRecv, j.local, j.len, 0, j.req, 0, 0, true};
      WireHdr h{};
      h.type = kMsgCts;
      h.id = j.peer_id;
      h.sink = sid;
      h.len = j.len;
      send_ctrl(h, nullptr, 0, nullptr);
      break;
    }
    case CmaJob::kPutPull: {
      uint64_t sid = next_id_++;
      sinks_[sid] =
          Sink{SinkKind::kPutTarget, j.local, j.len, 0, nullptr, j.key, j.peer_id, true, j.note};
      WireHdr h{};
      h.type = kMsgPutCts;
      h.id = j.peer_id;
      h.sink = sid;
      send_ctrl(h, nullptr, 0, nullptr);
      break;
    }
    case CmaJob::kGetPush:
      add_bulk(BulkJob{nullptr, j.peer_id, j.local, j.len, 0, j.key, j.peer_id});
      break;
  }
}

}  // namespace hmc::hoststage
