#include "device.h"

#include <rdma/fi_cm.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "context.h"
#include "endpoint.h"
#include "listener.h"
#include "util.h"
#include "wire.h"

namespace hmc::ofi {
namespace {

// Completion-queue entries read per fi_cq_read, and reads per progress call: progress does
// bounded work and returns, the core calls it again.
constexpr size_t kCqBatch = 32;
constexpr int kCqRounds = 16;
// A rendezvous read moves at most this much per operation, one operation per progress call:
// shm copies a read with cross-memory attach inside fi_read itself, so one read of a whole
// 1 GiB message held progress (the core's heartbeats, every other peer) for seconds, and a
// sender that died in the middle went unnoticed until the copy ended.
constexpr size_t kReadChunk = size_t{8} << 20;

// Errors that mean the remote process or the path to it is gone.
bool peer_error(int err) {
  switch (err) {
    case FI_EIO:
    case FI_ENOTCONN:
    case FI_ECONNREFUSED:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ETIMEDOUT:
    case FI_EHOSTDOWN:
    case FI_EHOSTUNREACH:
    case FI_ENETUNREACH:
    case FI_ENETDOWN:
    case FI_ESHUTDOWN:
    case FI_EADDRNOTAVAIL:
    case EPIPE:
    case EREMOTEIO: return true;
    default: return false;
  }
}

// Errors with which a target refuses one-sided access.
bool access_error(int err) {
  switch (err) {
    case FI_EACCES:
    case FI_EPERM:
    case FI_EINVAL:
    case FI_EFAULT:
    case FI_ENOKEY:
    case FI_EOPBADSTATE:
    case EKEYREJECTED: return true;
    default: return false;
  }
}

bool is_software_provider(const std::string& n) {
  return n == "tcp" || n == "sockets" || n == "udp" || n == "net" || n == "shm" || n == "sm2";
}

}  // namespace

Device::Device(Context& ctx, int index, DeviceChoice choice)
    : ctx_(ctx), index_(index), choice_(std::move(choice)) {
  mr_mode_ = static_cast<uint64_t>(choice_.info->domain_attr->mr_mode);
  key_bytes_ = choice_.info->domain_attr->mr_key_size;
  if (key_bytes_ == 0 || key_bytes_ > 8) key_bytes_ = 8;
  needs_local_desc_ = (mr_mode_ & FI_MR_LOCAL) != 0 || ctx_.cfg().force_mr_local;
  const PutCompletion pc = ctx_.cfg().put_completion;
  read_completion_ =
      pc == PutCompletion::kRead || (pc == PutCompletion::kAuto && !choice_.delivery_complete);
  eager_limit_ = ctx_.cfg().eager_limit;
  // Rendezvous by write needs the FIN to arrive after the data it follows.
  const fi_info* info = choice_.info.get();
  saw_order_ = (info->tx_attr->msg_order & FI_ORDER_SAW) != 0 &&
               (info->rx_attr->msg_order & FI_ORDER_SAW) != 0;
  const RndvMode rm = ctx_.cfg().rndv;
  write_rndv_ = rm == RndvMode::kWrite ? saw_order_ : rm == RndvMode::kAuto && saw_order_;
  const bool tcp = std::strncmp(provider(), "tcp", 3) == 0;
  const size_t chunk =
      ctx_.cfg().write_chunk_auto ? (tcp ? kTcpWriteChunk : 0) : ctx_.cfg().write_chunk;
  write_chunk_ = chunk == 0 ? SIZE_MAX : chunk;
  // A put in pieces asks for delivery completion on its last piece only (or reads behind it):
  // that says the earlier pieces are in place too only where writes are applied in order.
  put_pieces_ = read_completion_ || ((info->tx_attr->msg_order & FI_ORDER_WAW) != 0 &&
                                     (info->rx_attr->msg_order & FI_ORDER_WAW) != 0);
  // One chunk holds an eager message, an RTS with its FIN, or a hello.
  bounce_size_ =
      std::max({kMsgHeader + eager_limit_, kFinOutOffset + kFinSize, kHelloMax + 8, kAckSize + 8});
  bounce_size_ = (bounce_size_ + 63) & ~size_t{63};
  cookie_ = random_u64();
}

Device::~Device() {
  // Closing the endpoint ends libfabric's use of every operation context it holds; after that
  // every request left (orphans, queued posts, requests the core never tested) can go.
  ep_.reset();
  for (Request* r : live_) {
    if (r->cached != nullptr && cache_) cache_->release(r->cached);
    if (r->own_mr != nullptr) fi_close(&r->own_mr->fid);
    delete r;
  }
  live_.clear();
  dev_queue_.clear();
  queued_eps_.clear();
  cache_.reset();
  for (Slab& sl : slabs_) {
    if (sl.mr != nullptr) fi_close(&sl.mr->fid);
    std::free(sl.mem);
  }
  slabs_.clear();
  bounce_free_.clear();
  scratch_mr_.reset();
  av_map_.clear();
  av_.reset();
  cq_.reset();
  domain_.reset();
  fabric_.reset();
}

const Log& Device::log() const {
  return ctx_.log();
}

uint64_t Device::probe_addr() const {
  return virt_addr() ? reinterpret_cast<uintptr_t>(liveness_) : 0;
}

bool Device::same_host() const {
  if (same_host_provider(choice_.name)) return true;
  const uint64_t caps = choice_.info->caps;
  return (caps & FI_LOCAL_COMM) != 0 && (caps & FI_REMOTE_COMM) == 0;
}

hmc_plugin_status_t Device::open() {
  fi_info* info = choice_.info.get();
  const char* prov = info->fabric_attr->prov_name;
  const char* dom = info->domain_attr->name ? info->domain_attr->name : "?";
  auto fail = [&](const char* call, int rc) {
    log().write(HMC_LOG_WARN, "device '%s' (%s, domain %s): %s failed: %s", name().c_str(), prov,
                dom, call, fi_err(rc));
    return HMC_PLUGIN_ERR_NO_DEVICE;
  };
  int rc = fi_fabric(info->fabric_attr, fabric_.out(), nullptr);
  if (rc != 0) return fail("fi_fabric", rc);
  rc = fi_domain(fabric_.get(), info, domain_.out(), nullptr);
  if (rc != 0) return fail("fi_domain", rc);

  // A wait fd lets an idle core sleep in poll(2); without one the core polls.
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.wait_obj = FI_WAIT_FD;
  rc = fi_cq_open(domain_.get(), &cq_attr, cq_.out(), nullptr);
  if (rc != 0) {
    OFI_INFO(log(),
             "device '%s': no completion queue with a wait fd (%s); while it has work, "
             "the context's wait fd wakes the core every millisecond to poll it",
             name().c_str(), fi_err(rc));
    cq_attr.wait_obj = FI_WAIT_NONE;
    rc = fi_cq_open(domain_.get(), &cq_attr, cq_.out(), nullptr);
    if (rc != 0) return fail("fi_cq_open", rc);
  } else {
    int fd = -1;
    rc = fi_control(&cq_->fid, FI_GETWAIT, &fd);
    if (rc == 0 && fd >= 0)
      wait_fd_ = fd;
    else
      OFI_INFO(log(), "device '%s': FI_GETWAIT: %s; the core will poll it", name().c_str(),
               fi_err(rc));
  }

  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  av_attr.count = 64;
  rc = fi_av_open(domain_.get(), &av_attr, av_.out(), nullptr);
  if (rc != 0) return fail("fi_av_open", rc);

  rc = fi_endpoint(domain_.get(), info, ep_.out(), nullptr);
  if (rc != 0) return fail("fi_endpoint", rc);
  rc = fi_ep_bind(ep_.get(), &cq_->fid, FI_TRANSMIT | FI_RECV);
  if (rc != 0) return fail("fi_ep_bind(cq)", rc);
  rc = fi_ep_bind(ep_.get(), &av_->fid, 0);
  if (rc != 0) return fail("fi_ep_bind(av)", rc);
  if (same_host_provider(choice_.name)) {
    // shm names its shared region "<pid>:<domain>:<endpoint>" in /dev/shm, and a process killed
    // before closing leaves it there: a later process given the same pid then fails fi_enable
    // (EBUSY). A name of our own that no other process can have avoids that.
    char ep_name[64];
    std::snprintf(ep_name, sizeof ep_name, "hmc-%d-%016llx", static_cast<int>(::getpid()),
                  static_cast<unsigned long long>(random_u64()));
    rc = fi_setname(&ep_->fid, ep_name, std::strlen(ep_name) + 1);
    if (rc != 0)
      OFI_INFO(log(), "device '%s': fi_setname: %s; keeping the provider's endpoint name",
               name().c_str(), fi_err(rc));
  }
  rc = fi_enable(ep_.get());
  if (rc != 0) return fail("fi_enable", rc);

  address_.resize(kMaxAddr);
  size_t len = address_.size();
  rc = fi_getname(&ep_->fid, address_.data(), &len);
  if (rc != 0 || len == 0 || len > kMaxAddr) {
    if (rc == 0 || rc == -FI_ETOOSMALL)
      log().write(HMC_LOG_WARN,
                  "device '%s': endpoint address of %zu bytes exceeds the %zu a "
                  "connection handle carries",
                  name().c_str(), len, kMaxAddr);
    return fail("fi_getname", rc != 0 ? rc : -FI_ETOOSMALL);
  }
  address_.resize(len);

  cache_ = std::make_unique<MrCache>(*this, ctx_.cfg().mr_cache);
  if (choice_.rma) {
    std::string why;
    fid_mr* mr = nullptr;
    if (!register_memory(liveness_, sizeof(liveness_), FI_REMOTE_READ, HMC_MEM_IFACE_HOST, -1, &mr,
                         &why)) {
      log().write(HMC_LOG_WARN, "device '%s': cannot register the liveness word: %s",
                  name().c_str(), why.c_str());
      return HMC_PLUGIN_ERR_NO_DEVICE;
    }
    *liveness_mr_.out() = mr;
  }
  if (choice_.rma && needs_local_desc_) {
    std::string why;
    fid_mr* mr = nullptr;
    if (!register_local(scratch_, sizeof(scratch_), &mr, &why)) {
      log().write(HMC_LOG_WARN, "device '%s': cannot register the read-completion landing byte: %s",
                  name().c_str(), why.c_str());
      return HMC_PLUGIN_ERR_NO_DEVICE;
    }
    *scratch_mr_.out() = mr;
  }

  char fabric_name[96];
  std::snprintf(fabric_name, sizeof(fabric_name), "%s",
                info->fabric_attr->name ? info->fabric_attr->name : "?");
  OFI_INFO(log(),
           "device %d '%s': provider %s, fabric %s, domain %s; tagged%s%s; directed receive %s; "
           "mr_mode 0x%llx; messages over %zu bytes by %s; put completion by %s; wait fd %s%s",
           index_, name().c_str(), prov, fabric_name, dom, choice_.rma ? ", RMA" : "",
           choice_.hmem ? ", HMEM" : "", choice_.directed ? "yes" : "no (15 connections max)",
           static_cast<unsigned long long>(mr_mode_), eager_limit_,
           !choice_.rma  ? "the provider (no RMA: truncation is the provider's)"
           : write_rndv_ ? "the sender's write"
                         : "the receiver's read",
           !choice_.rma       ? "-"
           : read_completion_ ? "an ordered read"
                              : "FI_DELIVERY_COMPLETE",
           wait_fd_ >= 0 ? "yes" : "no", same_host() ? "; same host only" : "");
  if (ctx_.cfg().rndv == RndvMode::kWrite && !write_rndv_ && choice_.rma)
    OFI_WARN(log(),
             "device '%s': HMC_OFI_RNDV=write needs FI_ORDER_SAW, which %s lacks; "
             "messages move by the receiver's read",
             name().c_str(), prov);
  if (!choice_.directed)
    OFI_WARN(log(),
             "device '%s': provider %s has no FI_DIRECTED_RECV; peers are told apart by "
             "tag slots only, so at most 15 connections can be open on this device",
             name().c_str(), prov);
  return HMC_PLUGIN_SUCCESS;
}

void Device::fill_props(hmc_net_device_props_t* props) const {
  using P = hmc_net_device_props_t;
  const fi_info* info = choice_.info.get();
  if (HMC_ABI_HAS_FIELD(props, P, name)) props->name = choice_.name.c_str();
  if (HMC_ABI_HAS_FIELD(props, P, pci_path)) props->pci_path = nullptr;
  uint64_t mbps = 0;
  // Software providers report the interface's nominal speed, which says nothing about
  // loopback or shared memory: 0 lets the core calibrate. NICs report their link rate.
  if (!is_software_provider(choice_.name) && info->nic != nullptr &&
      info->nic->link_attr != nullptr)
    mbps = static_cast<uint64_t>(info->nic->link_attr->speed) / 8 / 1000000;
  if (HMC_ABI_HAS_FIELD(props, P, bandwidth_MBps)) props->bandwidth_MBps = mbps;
  if (HMC_ABI_HAS_FIELD(props, P, latency_ns)) props->latency_ns = 0;
  if (HMC_ABI_HAS_FIELD(props, P, mem_ifaces)) props->mem_ifaces = choice_.mem_ifaces;
  if (HMC_ABI_HAS_FIELD(props, P, flags))
    props->flags = HMC_NET_FLAG_TAGGED | (choice_.rma ? HMC_NET_FLAG_RMA : 0u) |
                   (same_host() ? HMC_NET_FLAG_SAME_HOST : 0u);
  if (HMC_ABI_HAS_FIELD(props, P, max_inflight))
    props->max_inflight = static_cast<uint32_t>(std::min<size_t>(info->tx_attr->size, UINT32_MAX));
  if (HMC_ABI_HAS_FIELD(props, P, max_msg_size)) {
    uint64_t m = info->ep_attr->max_msg_size;
    props->max_msg_size = m >= (uint64_t{1} << 62) ? 0 : m;
  }
}

// --- progress ----------------------------------------------------------------------------------

void Device::progress() {
  drain_cq();
  if (queued_ > 0) post_backlog();
  if (av_purge_pending_ && orphans_ == 0) purge_av();
}

bool Device::trywait() {
  if (queued_ > 0) return false;
  fid* f = &cq_->fid;
  return fi_trywait(fabric_.get(), &f, 1) == 0;
}

void Device::drain_cq() {
  // Handlers may post (a rendezvous read, a FIN); those posts queue on -FI_EAGAIN instead of
  // reading the CQ again from inside a handler.
  const bool outer = !in_completion_;
  in_completion_ = true;
  for (int round = 0; round < kCqRounds; ++round) {
    fi_cq_tagged_entry ents[kCqBatch];
    ssize_t n = fi_cq_read(cq_.get(), ents, kCqBatch);
    if (n > 0) {
      for (ssize_t i = 0; i < n; ++i) on_completion(ents[i].op_context, 0, ents[i].len, nullptr);
      continue;
    }
    if (n == -FI_EAGAIN) break;
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry e{};
      if (fi_cq_readerr(cq_.get(), &e, 0) != 1) break;
      // Some providers report the error number negated (shm's truncation).
      int err = e.err < 0 ? -e.err : e.err;
      if (err == 0) err = FI_EOTHER;
      if (log().enabled(HMC_LOG_DEBUG)) {
        char detail[256] = "";
        const char* s = fi_cq_strerror(cq_.get(), e.prov_errno, e.err_data, detail, sizeof(detail));
        log().write(HMC_LOG_DEBUG, "%s: completion error %d (%s), provider: %s", name().c_str(),
                    err, fi_err(err), s ? s : "");
      }
      on_completion(e.op_context, err, e.len, &e);
      continue;
    }
    if (!cq_error_logged_) {
      cq_error_logged_ = true;
      log().write(HMC_LOG_ERROR, "%s: fi_cq_read failed: %s", name().c_str(), fi_err(n));
    }
    break;
  }
  if (outer) in_completion_ = false;
}

void Device::on_completion(void* op_context, int err, size_t len, const fi_cq_err_entry* e) {
  if (op_context == nullptr) {
    OFI_DEBUG(log(), "%s: completion without an operation context (error %d) ignored",
              name().c_str(), err);
    return;
  }
  auto* op = static_cast<OpCtx*>(op_context);
  Request* r = op->owner;
  if (r->in_provider > 0) --r->in_provider;
  if (in_provider_total_ > 0) --in_provider_total_;
  if (err != 0 && r->first_error == 0) r->first_error = err;
  // Which part received something: a receive's main op, or the aux op waiting for a CTS/FIN.
  const bool receive_part =
      (op == &r->op &&
       (r->kind == ReqKind::kRecv || r->kind == ReqKind::kHelloRecv ||
        r->kind == ReqKind::kAckRecv) &&
       r->phase == Phase::kMatch) ||
      (op == &r->aux && r->kind == ReqKind::kSend &&
       (r->phase == Phase::kSendRead || r->phase == Phase::kSendWaitCts)) ||
      (op == &r->aux && r->kind == ReqKind::kRecv && r->phase == Phase::kRecvWaitFin);
  if (receive_part) r->rx_len = err == 0 ? len : (e != nullptr ? e->len : 0);
  // A request waits for all its parts (posted, or still queued).
  if (r->in_provider > 0 || r->queued) return;
  finish(r, r->first_error);
}

hmc_plugin_status_t Device::status_of(const Request* r, int err) const {
  if (err == 0) return HMC_PLUGIN_SUCCESS;
  const bool rma = r->kind == ReqKind::kPut || r->kind == ReqKind::kGet;
  if (err == FI_ETRUNC)
    return r->kind == ReqKind::kRecv ? HMC_PLUGIN_ERR_TRUNCATED : HMC_PLUGIN_ERR_INTERNAL;
  if (err == FI_ECANCELED) {
    if (r->cancel_requested) return HMC_PLUGIN_ERR_CANCELLED;
    // tcp answers a refused RMA so (then drops the link); otherwise the provider gave up on
    // the peer, or our lose() cancelled it.
    if (rma && r->ep != nullptr && !r->ep->lost()) return HMC_PLUGIN_ERR_REMOTE;
    return HMC_PLUGIN_ERR_PEER_LOST;
  }
  if (peer_error(err)) return HMC_PLUGIN_ERR_PEER_LOST;
  if (rma && access_error(err)) return HMC_PLUGIN_ERR_REMOTE;
  log().write(HMC_LOG_ERROR, "%s: operation failed: %s (error %d)", name().c_str(), fi_err(err),
              err);
  return HMC_PLUGIN_ERR_INTERNAL;
}

void Device::finish(Request* r, int err) {
  if (r->orphan) {
    --orphans_;
    release(r);
    return;
  }
  switch (r->kind) {
    case ReqKind::kCtrlSend:
      if (r->ep != nullptr)
        r->ep->on_ctrl_sent(r, err);  // releases r
      else
        release(r);
      return;
    case ReqKind::kHelloRecv:
      if (r->listener != nullptr)
        r->listener->on_hello(r, err);  // releases or reposts r
      else
        release(r);
      return;
    case ReqKind::kAckRecv:
      if (r->ep != nullptr)
        r->ep->on_ack(r, err);  // releases r
      else
        release(r);
      return;
    case ReqKind::kProbe:
      if (r->ep != nullptr)
        r->ep->on_probe(r, err);  // releases r
      else
        release(r);
      return;
    case ReqKind::kRecv:
      if (!r->native) {
        finish_recv(r, err);
        return;
      }
      break;
    case ReqKind::kSend:
      if (!r->native && err == 0 && r->phase == Phase::kSendWaitCts) {
        // The receiver answered the RTS: write what it accepts, FIN behind it.
        Cts cts;
        if (!decode_cts(r->bounce.data + kAnswerOffset, r->rx_len, &cts) ||
            cts.cookie != r->cookie) {
          log().write(HMC_LOG_ERROR, "%s: malformed rendezvous answer (CTS) from the peer",
                      name().c_str());
          err = FI_EOTHER;
          break;
        }
        if (cts.status != 0 || cts.len == 0) break;  // refused (REMOTE) or nothing to move
        r->xfer = static_cast<size_t>(std::min<uint64_t>(cts.len, r->len));
        r->remote_addr = cts.raddr;
        r->key = cts.key;
        r->read_off = 0;
        encode_fin(r->bounce.data + kFinOutOffset, r->cookie, 0);
        r->phase = Phase::kSendWrite;
        hmc_plugin_status_t st = local_desc(r->buf, r->xfer, r->desc, r);
        if (st == HMC_PLUGIN_SUCCESS) st = submit(r);
        if (st == HMC_PLUGIN_SUCCESS) return;
        err = FI_EOTHER;
      }
      break;
    default: break;
  }
  if (err == 0 && !last_piece_done(r)) {
    // A piece of the data is out: the next one follows (the last with the rendezvous' FIN,
    // or the put's delivery completion or trailing read).
    r->read_off += write_piece(r);
    defer(r);
    return;
  }
  r->result = status_of(r, err);
  if (r->result == HMC_PLUGIN_SUCCESS && r->kind == ReqKind::kSend && !r->native) {
    if (r->phase == Phase::kSendRead) {
      // The reader's FIN: it read the data (or could not).
      uint64_t cookie = 0;
      uint8_t status = 1;
      if (!decode_fin(r->bounce.data + kAnswerOffset, r->rx_len, &cookie, &status) ||
          cookie != r->cookie) {
        log().write(HMC_LOG_ERROR, "%s: malformed rendezvous answer (FIN) from the peer",
                    name().c_str());
        r->result = HMC_PLUGIN_ERR_INTERNAL;
      } else if (status != 0) {
        r->result = HMC_PLUGIN_ERR_REMOTE;
      }
    } else if (r->phase == Phase::kSendWaitCts) {
      Cts cts;
      decode_cts(r->bounce.data + kAnswerOffset, r->rx_len, &cts);
      if (cts.status != 0) r->result = HMC_PLUGIN_ERR_REMOTE;
    }
  }
  if (r->result == HMC_PLUGIN_SUCCESS)
    r->bytes = r->kind == ReqKind::kRecv ? std::min(r->rx_len, r->len) : r->len;
  else if (r->result == HMC_PLUGIN_ERR_TRUNCATED)
    r->bytes = r->len;
  else
    r->bytes = 0;
  // The buffer registered for the peer's access is closed as soon as the peer is done.
  if (r->own_mr != nullptr) {
    fi_close(&r->own_mr->fid);
    r->own_mr = nullptr;
  }
  r->done = true;
  if (r->ep != nullptr) r->ep->on_data_done(r, err);
}

void Device::finish_recv(Request* r, int err) {
  Endpoint* ep = r->ep;
  auto end = [&](hmc_plugin_status_t st, size_t bytes) {
    if (r->own_mr != nullptr) {
      fi_close(&r->own_mr->fid);
      r->own_mr = nullptr;
    }
    r->result = st;
    r->bytes = bytes;
    r->done = true;
    if (ep != nullptr) ep->on_data_done(r, err);
  };
  // A truncated receive reports the length that was sent (net.h); the buffer holds its start.
  auto moved = [&] {
    if (r->msg_len > r->xfer)
      end(HMC_PLUGIN_ERR_TRUNCATED, static_cast<size_t>(r->msg_len));
    else
      end(HMC_PLUGIN_SUCCESS, r->xfer);
  };
  if (r->phase == Phase::kRecvRead) {
    // A chunk was read: the next one waits for the next progress call (see kReadChunk).
    const size_t next = r->read_off + std::min(kReadChunk, r->xfer - r->read_off);
    if (err == 0 && next < r->xfer && ep != nullptr && !ep->lost()) {
      r->read_off = next;
      defer(r);
      return;
    }
    // The read ended: tell the sender, whose send completes on it.
    if (ep != nullptr) ep->send_fin(r->cookie, err == 0 ? 0 : 1);
    if (err != 0) {
      hmc_plugin_status_t st = status_of(r, err);
      end(st == HMC_PLUGIN_ERR_REMOTE ? HMC_PLUGIN_ERR_PEER_LOST : st, 0);
      return;
    }
    moved();
    return;
  }
  if (r->phase == Phase::kRecvWaitFin) {
    // The writer's FIN follows its data (FI_ORDER_SAW): the data is in place.
    uint64_t cookie = 0;
    uint8_t status = 1;
    if (err != 0) {
      end(status_of(r, err), 0);
    } else if (!decode_fin(r->bounce.data + kAnswerOffset, r->rx_len, &cookie, &status) ||
               cookie != r->cookie || status != 0) {
      log().write(HMC_LOG_ERROR, "%s: malformed rendezvous FIN from the peer", name().c_str());
      end(HMC_PLUGIN_ERR_INTERNAL, 0);
    } else {
      moved();
    }
    return;
  }
  if (err != 0) {
    end(status_of(r, err), 0);
    return;
  }
  MsgHeader h;
  if (!decode_msg(r->bounce.data, r->rx_len, &h)) {
    log().write(HMC_LOG_ERROR, "%s: a malformed message (%zu bytes) arrived on a data tag",
                name().c_str(), r->rx_len);
    end(HMC_PLUGIN_ERR_INTERNAL, 0);
    return;
  }
  if (ep != nullptr && h.slot != ep->my_slot()) {
    // Two connections' tags met in the provider's tag space (wire.h): the message is another
    // connection's, and is not delivered here.
    log().write(HMC_LOG_ERROR,
                "%s: a message for the connection of slot %u matched a receive of slot %d "
                "(their tags collide in the provider's tag space); the receive fails",
                name().c_str(), h.slot, ep->my_slot());
    end(HMC_PLUGIN_ERR_INTERNAL, 0);
    return;
  }
  if (h.type == MsgType::kEager) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(h.len, r->len));
    if (n > 0 && r->iface != HMC_MEM_IFACE_HOST) {
      // The plugin cannot copy into device memory; peers sending into device memory must
      // send everything by rendezvous (HMC_OFI_EAGER_LIMIT=0 on their side).
      log().write(HMC_LOG_ERROR,
                  "%s: a %llu-byte eager message arrived for a receive into device "
                  "memory (kind 0x%x); the sender must set HMC_OFI_EAGER_LIMIT=0",
                  name().c_str(), static_cast<unsigned long long>(h.len), r->iface);
      end(HMC_PLUGIN_ERR_NOT_SUPPORTED, 0);
      return;
    }
    if (n > 0) std::memcpy(r->buf, r->bounce.data + kMsgHeader, n);
    end(h.len > r->len ? HMC_PLUGIN_ERR_TRUNCATED : HMC_PLUGIN_SUCCESS, static_cast<size_t>(h.len));
    return;
  }
  // RTS: the data moves straight into the user buffer, as much as fits.
  r->msg_len = h.len;
  r->cookie = h.cookie;
  r->xfer = static_cast<size_t>(std::min<uint64_t>(h.len, r->len));
  const bool write = h.type == MsgType::kRtsWrite;
  if (r->xfer == 0) {
    if (ep != nullptr) {
      if (write) {
        Cts none;
        none.cookie = h.cookie;
        ep->send_cts(none);
      } else {
        ep->send_fin(h.cookie, 0);
      }
    }
    moved();
    return;
  }
  hmc_plugin_status_t st = HMC_PLUGIN_SUCCESS;
  if (write) {
    // Expose exactly the accepted bytes for the writer, wait for its FIN, then answer.
    st = register_rndv(r, r->xfer, FI_RECV | FI_REMOTE_WRITE);
    if (st == HMC_PLUGIN_SUCCESS) {
      r->phase = Phase::kRecvWaitFin;
      st = submit(r);
    }
    Cts cts;
    cts.cookie = h.cookie;
    if (st == HMC_PLUGIN_SUCCESS) {
      cts.len = r->xfer;
      cts.raddr = r->remote_addr;
      cts.key = r->key;
    } else {
      cts.status = 1;
    }
    if (ep != nullptr) ep->send_cts(cts);
    if (st != HMC_PLUGIN_SUCCESS) end(st, 0);
    return;
  }
  if (r->desc == nullptr) st = local_desc(r->buf, r->xfer, nullptr, r);
  if (st == HMC_PLUGIN_SUCCESS) {
    r->phase = Phase::kRecvRead;
    r->read_off = 0;
    r->remote_addr = h.raddr;
    r->key = h.key;
    st = submit(r);
  }
  if (st != HMC_PLUGIN_SUCCESS) {
    if (ep != nullptr) ep->send_fin(h.cookie, 1);
    end(st, 0);
  }
}

// --- posting -----------------------------------------------------------------------------------

Request* Device::new_request(ReqKind kind) {
  auto* r = new Request;
  r->kind = kind;
  r->op.owner = r;
  r->aux.owner = r;
  live_.insert(r);
  return r;
}

void Device::release(Request* r) {
  if (r->cached != nullptr) cache_->release(r->cached);
  if (r->own_mr != nullptr) fi_close(&r->own_mr->fid);
  if (r->bounce.data != nullptr) bounce_put(r->bounce);
  live_.erase(r);
  delete r;
}

uint64_t Device::next_cookie() {
  return ++cookie_ & kCtrlIdMask;
}

int Device::parts(const Request* r) const {
  if (r->kind == ReqKind::kPut) return r->trailing_read && last_piece(r) ? 2 : 1;
  if (r->kind == ReqKind::kSend && !r->native && r->phase == Phase::kSendWrite)
    return last_piece(r) ? 2 : 1;  // a piece of the data; the FIN behind the last one
  if (r->kind == ReqKind::kSend && !r->native && r->phase != Phase::kEager) return 2;
  return 1;
}

size_t Device::write_piece(const Request* r) const {
  if (r->kind == ReqKind::kPut)
    return std::min(put_pieces_ ? write_chunk_ : SIZE_MAX, r->len - r->read_off);
  return std::min(write_chunk_, r->xfer - r->read_off);
}

bool Device::last_piece(const Request* r) const {
  return r->read_off + write_piece(r) >= (r->kind == ReqKind::kPut ? r->len : r->xfer);
}

bool Device::last_piece_done(const Request* r) const {
  const bool pieces = r->kind == ReqKind::kPut ||
                      (r->kind == ReqKind::kSend && !r->native && r->phase == Phase::kSendWrite);
  return !pieces || last_piece(r);
}

ssize_t Device::post_part(Request* r, int part) {
  fid_ep* ep = ep_.get();
  switch (r->kind) {
    case ReqKind::kSend:
      if (r->native) return fi_tsend(ep, r->buf, r->len, r->desc, r->addr, r->tag, &r->op);
      switch (r->phase) {
        case Phase::kEager:
          return fi_tsend(ep, r->bounce.data, r->bounce_len, r->bounce.desc, r->addr, r->tag,
                          &r->op);
        case Phase::kSendRead:
        case Phase::kSendWaitCts:
          // The answer's receive goes first, so it is never unexpected.
          if (part == 0)
            return fi_trecv(
                ep, r->bounce.data + kAnswerOffset,
                r->phase == Phase::kSendRead ? kFinSize : kCtsSize, r->bounce.desc,
                directed() ? r->addr : FI_ADDR_UNSPEC,
                ctrl_tag(r->phase == Phase::kSendRead ? CtrlType::kFin : CtrlType::kCts, r->cookie),
                0, &r->aux);
          return fi_tsend(ep, r->bounce.data, r->bounce_len, r->bounce.desc, r->addr, r->tag,
                          &r->op);
        default:  // Phase::kSendWrite: a piece of the data; after the last, the FIN (ordered
                  // after the writes, FI_ORDER_SAW)
          if (part == 0)
            return fi_write(ep, static_cast<uint8_t*>(r->buf) + r->read_off, write_piece(r),
                            r->desc, r->addr, r->remote_addr + r->read_off, r->key, &r->op);
          return fi_tsend(ep, r->bounce.data + kFinOutOffset, kFinSize, r->bounce.desc, r->addr,
                          ctrl_tag(CtrlType::kFin, r->cookie), &r->aux);
      }
    case ReqKind::kCtrlSend:
      return fi_tsend(ep, r->bounce.data, r->bounce_len, r->bounce.desc, r->addr, r->tag, &r->op);
    case ReqKind::kRecv:
      if (r->native) return fi_trecv(ep, r->buf, r->len, r->desc, r->addr, r->tag, 0, &r->op);
      if (r->phase == Phase::kMatch)
        return fi_trecv(ep, r->bounce.data, r->bounce_len, r->bounce.desc, r->addr, r->tag, 0,
                        &r->op);
      if (r->phase == Phase::kRecvRead)
        return fi_read(ep, static_cast<uint8_t*>(r->buf) + r->read_off,
                       std::min(kReadChunk, r->xfer - r->read_off), r->desc, r->addr,
                       r->remote_addr + r->read_off, r->key, &r->aux);
      return fi_trecv(ep, r->bounce.data + kAnswerOffset, kFinSize, r->bounce.desc,
                      directed() ? r->addr : FI_ADDR_UNSPEC, ctrl_tag(CtrlType::kFin, r->cookie), 0,
                      &r->aux);
    case ReqKind::kHelloRecv:
    case ReqKind::kAckRecv:
      return fi_trecv(ep, r->bounce.data, r->bounce_len, r->bounce.desc, r->addr, r->tag, 0,
                      &r->op);
    case ReqKind::kPut: {
      if (part == 0) {
        const size_t piece = write_piece(r);
        iovec iov{static_cast<uint8_t*>(r->buf) + r->read_off, piece};
        fi_rma_iov rma{r->remote_addr + r->read_off, piece, r->key};
        fi_msg_rma msg{};
        msg.msg_iov = &iov;
        msg.desc = &r->desc;
        msg.iov_count = 1;
        msg.addr = r->addr;
        msg.rma_iov = &rma;
        msg.rma_iov_count = 1;
        msg.context = &r->op;
        // Completion must mean "in place at the target" (net.h). Without delivery completion,
        // an ordered read of the last byte follows: reads after writes are processed in order
        // (FI_ORDER_RAW), so its completion implies the write's. A put in pieces asks it of the
        // last piece only (put_pieces_: writes applied in order).
        const bool deliver = !r->trailing_read && last_piece(r);
        return fi_writemsg(ep, &msg, FI_COMPLETION | (deliver ? FI_DELIVERY_COMPLETE : 0));
      }
      void* desc = scratch_desc();
      iovec iov{scratch_, 1};
      fi_rma_iov rma{r->remote_addr + r->len - 1, 1, r->key};
      fi_msg_rma msg{};
      msg.msg_iov = &iov;
      msg.desc = &desc;
      msg.iov_count = 1;
      msg.addr = r->addr;
      msg.rma_iov = &rma;
      msg.rma_iov_count = 1;
      msg.context = &r->aux;
      return fi_readmsg(ep, &msg, FI_COMPLETION);
    }
    case ReqKind::kGet:
      return fi_read(ep, r->buf, r->len, r->desc, r->addr, r->remote_addr, r->key, &r->op);
    case ReqKind::kProbe:
      return fi_read(ep, scratch_, 8, scratch_desc(), r->addr, r->remote_addr, r->key, &r->op);
  }
  return -FI_EINVAL;
}

ssize_t Device::post(Request* r) {
  while (r->posted_parts < parts(r)) {
    ssize_t rc = post_part(r, r->posted_parts);
    if (rc != 0) return rc;
    ++r->posted_parts;
    ++r->in_provider;
    ++in_provider_total_;
  }
  return 0;
}

bool Device::retry_later(ssize_t rc) {
  if (rc == -FI_EAGAIN) return true;
  if (rc != -FI_ENOMEM || in_provider_total_ == 0) return false;
  if (!full_logged_) {
    full_logged_ = true;
    log().write(HMC_LOG_INFO,
                "%s: the provider's queue is full (%zu operations in it): further posts wait in "
                "the plugin until completions make room",
                name().c_str(), in_provider_total_);
  }
  return true;
}

bool Device::receiving_part(const Request* r, int part) {
  switch (r->kind) {
    case ReqKind::kSend:
      return !r->native && part == 0 &&
             (r->phase == Phase::kSendRead || r->phase == Phase::kSendWaitCts);
    case ReqKind::kRecv: return r->native || r->phase != Phase::kRecvRead;
    case ReqKind::kHelloRecv:
    case ReqKind::kAckRecv: return true;
    default: return false;
  }
}

bool Device::queues_as_receive(const Request* r) {
  switch (r->kind) {
    case ReqKind::kRecv: return r->native || r->phase != Phase::kRecvRead;
    case ReqKind::kHelloRecv:
    case ReqKind::kAckRecv: return true;
    default: return false;
  }
}

hmc_plugin_status_t Device::submit(Request* r) {
  r->posted_parts = 0;
  r->in_provider = 0;
  r->first_error = 0;
  ssize_t rc = -FI_EAGAIN;
  std::deque<Request*>& q = queue_of(r);
  // Queued posts go first: same-tag messages must leave (and receives match) in post order.
  if (q.empty()) {
    rc = post(r);
    if (retry_later(rc) && !in_completion_) {
      drain_cq();
      rc = post(r);
    }
  }
  if (rc == 0) return HMC_PLUGIN_SUCCESS;
  if (retry_later(rc)) {
    if (r->ep != nullptr) {
      if (!r->ep->has_queued()) queued_eps_.push_back(r->ep);
      // A send refused (not its answer's receive) towards the peer: the peer may be gone.
      if (&q == &r->ep->tx_queue() && q.empty() && rc == -FI_EAGAIN &&
          !receiving_part(r, r->posted_parts) && r->ep->stall_since_ns == 0)
        r->ep->stall_since_ns = ctx_.now_ns();
    }
    r->queued = true;
    q.push_back(r);
    ++queued_;
    return HMC_PLUGIN_SUCCESS;
  }
  if (r->in_provider > 0) {
    // A part went out but the next cannot be posted: the request ends with the error once
    // the posted part completes.
    r->first_error = static_cast<int>(-rc);
    r->posted_parts = parts(r);
    return HMC_PLUGIN_SUCCESS;
  }
  if (peer_error(static_cast<int>(-rc))) return HMC_PLUGIN_ERR_PEER_LOST;
  log().write(HMC_LOG_ERROR, "%s: posting an operation failed: %s", name().c_str(), fi_err(rc));
  return rc == -FI_ENOMEM ? HMC_PLUGIN_ERR_NO_MEMORY : HMC_PLUGIN_ERR_INTERNAL;
}

void Device::defer(Request* r) {
  r->posted_parts = 0;
  r->in_provider = 0;
  r->first_error = 0;
  std::deque<Request*>& q = queue_of(r);
  if (r->ep != nullptr && !r->ep->has_queued()) queued_eps_.push_back(r->ep);
  r->queued = true;
  q.push_back(r);
  ++queued_;
}

std::deque<Request*>& Device::queue_of(Request* r) {
  if (r->ep == nullptr) return dev_queue_;
  return queues_as_receive(r) ? r->ep->rx_queue() : r->ep->tx_queue();
}

void Device::post_backlog() {
  const bool outer = !in_completion_;
  in_completion_ = true;
  // Posts from one queue until the provider refuses; the last refusal, 0 when the queue
  // emptied. A refused request stays at the head, its posted parts counted.
  auto drain = [&](std::deque<Request*>& q, bool* moved) -> ssize_t {
    while (!q.empty()) {
      Request* r = q.front();
      const int before = r->posted_parts;
      ssize_t rc = post(r);
      if (r->posted_parts != before) *moved = true;
      if (retry_later(rc)) return rc;
      q.pop_front();
      --queued_;
      r->queued = false;
      if (rc != 0)
        fail_queued(r, rc);
      else if (r->in_provider == 0)
        finish(r, r->first_error);  // its posted parts already ended
    }
    return 0;
  };
  bool moved = false;
  drain(dev_queue_, &moved);
  for (Endpoint* ep : std::vector<Endpoint*>(queued_eps_.begin(), queued_eps_.end())) {
    if (std::find(queued_eps_.begin(), queued_eps_.end(), ep) == queued_eps_.end()) continue;
    drain(ep->rx_queue(), &moved);
    moved = false;
    ssize_t rc = drain(ep->tx_queue(), &moved);
    const std::deque<Request*>& tx = ep->tx_queue();
    // The peer is suspect only while the send queue's head is refused with -FI_EAGAIN and
    // nothing of it went out; a head waiting for room for its answer's receive is not.
    if (rc == -FI_EAGAIN && !moved && !receiving_part(tx.front(), tx.front()->posted_parts)) {
      if (ep->stall_since_ns == 0) ep->stall_since_ns = ctx_.now_ns();
    } else {
      ep->stall_since_ns = 0;
    }
    if (!ep->has_queued()) forget_queue(ep);
  }
  if (outer) in_completion_ = false;
}

void Device::forget_queue(Endpoint* ep) {
  auto it = std::find(queued_eps_.begin(), queued_eps_.end(), ep);
  if (it != queued_eps_.end()) queued_eps_.erase(it);
  ep->stall_since_ns = 0;
}

void Device::fail_queued(Request* r, ssize_t rc) {
  const int err = static_cast<int>(-rc);
  if (r->first_error == 0) r->first_error = err;
  r->posted_parts = parts(r);
  if (r->in_provider > 0) return;  // the posted part ends it
  OFI_DEBUG(log(), "%s: a queued operation could not be posted: %s", name().c_str(), fi_err(rc));
  finish(r, r->first_error);
}

void Device::unqueue(Request* r) {
  if (!r->queued) return;
  std::deque<Request*>& q = queue_of(r);
  auto it = std::find(q.begin(), q.end(), r);
  if (it != q.end()) {
    q.erase(it);
    --queued_;
  }
  r->queued = false;
  if (r->ep != nullptr && !r->ep->has_queued()) forget_queue(r->ep);
}

bool Device::cancel_posted(Request* r) {
  if (r->in_provider == 0) return false;
  OpCtx* target = nullptr;
  switch (r->kind) {
    case ReqKind::kRecv:
      if (r->phase == Phase::kMatch)
        target = &r->op;
      else if (r->phase == Phase::kRecvWaitFin)
        target = &r->aux;
      break;
    case ReqKind::kSend:
      if (r->phase == Phase::kSendRead || r->phase == Phase::kSendWaitCts) target = &r->aux;
      break;
    case ReqKind::kHelloRecv:
    case ReqKind::kAckRecv: target = &r->op; break;
    default: break;
  }
  return target != nullptr && fi_cancel(&ep_->fid, target) == 0;
}

void Device::adopt_orphan(Request* r) {
  if (r->queued) unqueue(r);  // while r->ep still names its queue
  r->ep = nullptr;
  r->listener = nullptr;
  if (r->orphan) return;
  if (r->in_provider == 0) {
    release(r);
    return;
  }
  r->orphan = true;
  ++orphans_;
}

// --- bounce pool ---------------------------------------------------------------------------

Bounce Device::bounce_get() {
  if (bounce_free_.empty()) {
    // A slab of chunks, registered once when the provider needs local descriptors.
    const size_t count = std::max<size_t>(8, (size_t{2} << 20) / bounce_size_);
    Slab sl;
    if (::posix_memalign(reinterpret_cast<void**>(&sl.mem), 4096, count * bounce_size_) != 0)
      throw std::bad_alloc();
    if (needs_local_desc_) {
      std::string why;
      if (!register_local(sl.mem, count * bounce_size_, &sl.mr, &why)) {
        std::free(sl.mem);
        log().write(HMC_LOG_ERROR, "%s: cannot register bounce buffers: %s", name().c_str(),
                    why.c_str());
        throw std::bad_alloc();
      }
    }
    void* desc = sl.mr != nullptr ? fi_mr_desc(sl.mr) : nullptr;
    for (size_t i = count; i-- > 0;) bounce_free_.push_back({sl.mem + i * bounce_size_, desc});
    slabs_.push_back(sl);
  }
  Bounce b = bounce_free_.back();
  bounce_free_.pop_back();
  return b;
}

void Device::bounce_put(Bounce b) {
  bounce_free_.push_back(b);
}

hmc_plugin_status_t Device::register_rndv(Request* r, size_t len, uint64_t access) {
  std::string why;
  if (!register_memory(r->buf, len, access, r->iface, r->ordinal, &r->own_mr, &why)) {
    log().write(HMC_LOG_ERROR, "%s: cannot register a %zu-byte buffer for the peer's %s: %s",
                name().c_str(), len, (access & FI_REMOTE_READ) ? "read" : "write", why.c_str());
    return HMC_PLUGIN_ERR_NO_MEMORY;
  }
  r->key = fi_mr_key(r->own_mr);
  r->remote_addr = virt_addr() ? reinterpret_cast<uintptr_t>(r->buf) : 0;
  return HMC_PLUGIN_SUCCESS;
}

// --- address vector and slots --------------------------------------------------------------

AvEntry* Device::av_acquire(const std::vector<uint8_t>& addr, std::string* why) {
  std::string key(addr.begin(), addr.end());
  auto it = av_map_.find(key);
  if (it != av_map_.end()) {
    ++it->second->refs;
    return it->second.get();
  }
  auto e = std::make_unique<AvEntry>();
  e->addr = key;
  int n = fi_av_insert(av_.get(), addr.data(), 1, &e->fi_addr, 0, nullptr);
  if (n != 1 || e->fi_addr == FI_ADDR_NOTAVAIL) {
    *why = std::string("fi_av_insert: ") + (n < 0 ? fi_err(n) : "the address was not accepted");
    return nullptr;
  }
  e->refs = 1;
  AvEntry* raw = e.get();
  av_map_.emplace(std::move(key), std::move(e));
  return raw;
}

void Device::av_release(AvEntry* e) {
  if (e == nullptr) return;
  if (--e->refs > 0) return;
  // Removing the address closes the provider's connection to it; operations still inside the
  // provider towards it are let finish first.
  if (orphans_ == 0)
    purge_av();
  else
    av_purge_pending_ = true;
}

void Device::purge_av() {
  av_purge_pending_ = false;
  for (auto it = av_map_.begin(); it != av_map_.end();) {
    if (it->second->refs > 0) {
      ++it;
      continue;
    }
    fi_addr_t a = it->second->fi_addr;
    int rc = fi_av_remove(av_.get(), &a, 1, 0);
    if (rc != 0) OFI_DEBUG(log(), "%s: fi_av_remove: %s", name().c_str(), fi_err(rc));
    it = av_map_.erase(it);
  }
}

int Device::slot_acquire(AvEntry* e) {
  uint16_t& used = choice_.directed ? e->slots : device_slots_;
  int& next = choice_.directed ? e->next_slot : device_next_slot_;
  for (int i = 0; i < kDataSlots; ++i) {
    int s = (next + i) % kDataSlots;
    if ((used & (1u << s)) == 0) {
      used = static_cast<uint16_t>(used | (1u << s));
      next = (s + 1) % kDataSlots;
      return s;
    }
  }
  return -1;
}

void Device::slot_release(AvEntry* e, int slot) {
  if (slot < 0) return;
  uint16_t& used = choice_.directed ? e->slots : device_slots_;
  used = static_cast<uint16_t>(used & ~(1u << slot));
}

// --- memory --------------------------------------------------------------------------------

hmc_plugin_status_t Device::local_desc(const void* buf, size_t len, void* mr_desc, Request* r) {
  r->desc = nullptr;
  if (mr_desc != nullptr) {
    r->desc = mr_desc;
    return HMC_PLUGIN_SUCCESS;
  }
  if (!needs_local_desc_ || len == 0) return HMC_PLUGIN_SUCCESS;
  return cache_->acquire(buf, len, &r->desc, &r->cached);
}

bool Device::register_memory(void* addr, size_t len, uint64_t access, uint32_t iface, int ordinal,
                             fid_mr** out, std::string* why) {
  iovec iov{addr, len};
  fi_mr_attr attr{};
  attr.mr_iov = &iov;
  attr.iov_count = 1;
  attr.access = access;
  attr.offset = 0;  // without FI_MR_VIRT_ADDR, peers address the region from offset 0
  attr.iface = FI_HMEM_SYSTEM;
  if (iface == HMC_MEM_IFACE_CUDA) {
    attr.iface = FI_HMEM_CUDA;
    attr.device.cuda = ordinal;
  } else if (iface == HMC_MEM_IFACE_ROCM) {
    attr.iface = FI_HMEM_ROCR;
  }
  const bool prov_key = (mr_mode_ & FI_MR_PROV_KEY) != 0;
  const uint64_t key_mask = key_bytes_ >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * key_bytes_)) - 1;
  int rc = -FI_ENOKEY;
  fid_mr* mr = nullptr;
  // Requested keys are random, so a key that outlived its registration (a peer holding a
  // stale rkey) is unlikely to name a later one; a collision is retried.
  for (int attempt = 0; attempt < 8; ++attempt) {
    attr.requested_key = prov_key ? 0 : (random_u64() & key_mask);
    rc = fi_mr_regattr(domain_.get(), &attr, 0, &mr);
    if (rc != -FI_ENOKEY && rc != -EKEYREJECTED && rc != -FI_EBUSY) break;
  }
  if (rc != 0) {
    *why = std::string("fi_mr_regattr: ") + fi_err(rc);
    return false;
  }
  if ((mr_mode_ & FI_MR_ENDPOINT) != 0) {
    rc = fi_mr_bind(mr, &ep_->fid, 0);
    if (rc == 0) rc = fi_mr_enable(mr);
    if (rc != 0) {
      fi_close(&mr->fid);
      *why = std::string("binding the registration to the endpoint: ") + fi_err(rc);
      return false;
    }
  }
  *out = mr;
  return true;
}

}  // namespace hmc::ofi
