// Cross-memory attach on the shm device: the side that owns the destination (a receive buffer,
// or a registered region for put) or the source (a region for get) copies the bytes itself with
// process_vm_readv/process_vm_writev, one chunk per step, so only the owner touches its memory
// and the data moves with a single copy. A vectored put or get moves up to IOV_MAX pieces (and a
// chunk's bytes) per system call.
//
// When the kernel refuses (EPERM: ptrace restrictions such as Yama scope or a non-dumpable peer;
// ENOSYS: no CMA), the transfer falls back to streaming over the endpoint's Unix socket, the same
// CTS/DATA path tcp uses, and the endpoint stops trying CMA. The first such failure of a context
// is logged at warn level with the reason.
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <climits>

#include "context.h"
#include "endpoint.h"

namespace hmc::hoststage {

void Endpoint::run_cma() {
  const size_t chunk = ctx_.cfg().shm_chunk;
  size_t budget = 2 * chunk;  // per progress call
  while (!cma_.empty() && !failed()) {
    CmaJob& j = cma_.front();
    if (!j.vec.empty()) {
      if (run_cma_vec(j, &budget)) break;  // the budget is spent, or the job waits
      continue;
    }
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

// Returns true when the caller should stop for this progress call (the budget is spent); pops the
// job when it ended.
bool Endpoint::run_cma_vec(CmaJob& j, size_t* budget) {
  // The region of a key never changes bounds while it lives: one look per step covers every
  // piece checked at arrival.
  const uint32_t need =
      j.kind == CmaJob::kPutVPull ? HMC_NET_ACCESS_REMOTE_WRITE : HMC_NET_ACCESS_REMOTE_READ;
  const VecSpan& head = j.vec[j.piece];
  if (!ctx_.regions().check_local(j.key, head.local, head.len, need)) {
    CmaJob done = std::move(j);
    cma_.pop_front();
    finish_cma(done, HMC_PLUGIN_ERR_REMOTE, HMC_PLUGIN_ERR_REMOTE);
    return false;
  }
  iovec liov[IOV_MAX], riov[IOV_MAX];
  int cnt = 0;
  size_t want = 0;
  const size_t cap = ctx_.cfg().shm_chunk;
  for (size_t i = j.piece; i < j.vec.size() && cnt < IOV_MAX && want < cap; ++i) {
    const VecSpan& p = j.vec[i];
    uint64_t off = i == j.piece ? j.done : 0;
    size_t n = static_cast<size_t>(std::min<uint64_t>(p.len - off, cap - want));
    if (n == 0) continue;
    liov[cnt] = iovec{p.local + off, n};
    riov[cnt] = iovec{reinterpret_cast<void*>(static_cast<uintptr_t>(p.remote + off)), n};
    want += n;
    ++cnt;
  }
  ssize_t got = 0;
  if (cnt > 0) {
    got = j.kind == CmaJob::kGetVPush
              ? ::process_vm_writev(peer_pid_, liov, static_cast<unsigned long>(cnt), riov,
                                    static_cast<unsigned long>(cnt), 0)
              : ::process_vm_readv(peer_pid_, liov, static_cast<unsigned long>(cnt), riov,
                                   static_cast<unsigned long>(cnt), 0);
    if (got < 0 && errno == EINTR) return false;
    if (got <= 0) {
      int err = got < 0 ? errno : EFAULT;
      CmaJob done = std::move(j);
      cma_.pop_front();
      if (err == EPERM || err == ENOSYS || err == EACCES) {
        cma_fallback(done, err);
      } else if (err == ESRCH) {
        fail(HMC_PLUGIN_ERR_PEER_LOST, "process %d is gone (cross-memory copy)",
             static_cast<int>(peer_pid_));
        return true;
      } else {
        HS_WARN(ctx_.log(), "%s: vectored cross-memory copy of %d pieces failed: %s", name_.c_str(),
                cnt, errno_text(err).c_str());
        finish_cma(done, HMC_PLUGIN_ERR_REMOTE, HMC_PLUGIN_ERR_INVALID_ARGUMENT);
      }
      return false;
    }
  }
  // Advance over what moved (a short count stops inside a piece) and over empty pieces.
  uint64_t left = static_cast<uint64_t>(got);
  while (j.piece < j.vec.size()) {
    uint64_t rest = j.vec[j.piece].len - j.done;
    if (rest > left) {
      j.done += left;
      break;
    }
    left -= rest;
    ++j.piece;
    j.done = 0;
  }
  if (j.piece == j.vec.size()) {
    CmaJob done = std::move(j);
    cma_.pop_front();
    finish_cma(done, HMC_PLUGIN_SUCCESS, HMC_PLUGIN_SUCCESS);
  }
  if (static_cast<size_t>(got) >= *budget) return true;
  *budget -= static_cast<size_t>(got);
  return false;
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
    case CmaJob::kPutVPull:
    case CmaJob::kGetVPush: vec_ack(j.peer_id, peer_st, 0); break;
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
    // The rest of a vectored job, from the piece it stopped in (whole: bytes already copied are
    // copied again), goes by stream.
    case CmaJob::kPutVPull: {
      uint64_t sid = next_id_++;
      Sink& sk = sinks_[sid];
      sk = Sink{SinkKind::kPutVTarget, nullptr, 0, 0, nullptr, j.key, j.peer_id, true};
      sk.vec.assign(j.vec.begin() + static_cast<std::ptrdiff_t>(j.piece), j.vec.end());
      for (const VecSpan& p : sk.vec) sk.len += p.len;
      WireHdr h{};
      h.type = kMsgVecCts;
      h.id = j.peer_id;
      h.sink = sid;
      h.addr = j.first + j.piece;
      h.len = sk.vec.size();
      send_ctrl(h, nullptr, 0, nullptr);
      break;
    }
    case CmaJob::kGetVPush: {
      BulkJob b{nullptr, j.peer_id, nullptr, 0, 0, j.key, j.peer_id};
      b.vec = std::make_shared<const std::vector<VecSpan>>(
          j.vec.begin() + static_cast<std::ptrdiff_t>(j.piece), j.vec.end());
      b.tag_base = j.first + j.piece;
      add_bulk(std::move(b));
      break;
    }
  }
}

}  // namespace hmc::hoststage
