#include "device.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "context.h"
#include "endpoint.h"

namespace hmc::ibverbs {
namespace {

constexpr uint64_t kRecvBit = 1ull << 63;
constexpr size_t kRecvChunk = 64;  // receive buffers registered at once
constexpr size_t kSendChunk = 64;  // send slots registered at once
constexpr int kPollBatch = 32;

}  // namespace

Device::Device(Context& ctx, const PortInfo& info) : ctx_(ctx), info_(info) {}

const VerbsApi& Device::api() const {
  return ctx_.api();
}
const Log& Device::log() const {
  return ctx_.log();
}

Device::~Device() {
  const VerbsApi& v = api();
  if (srq_ != nullptr) v.destroy_srq(srq_);
  if (cq_ != nullptr) {
    if (unacked_events_ > 0) v.ack_cq_events(cq_, unacked_events_);
    v.destroy_cq(cq_);
  }
  if (chan_ != nullptr) v.destroy_comp_channel(chan_);
  auto unmap = [&](const Chunk& c) {
    if (c.mr != nullptr) v.dereg_mr(c.mr);
    if (c.mem != nullptr) munmap(c.mem, c.bytes);
  };
  for (auto* chunks : {&recv_chunks_, &send_chunks_})
    for (const Chunk& c : *chunks) unmap(c);
  unmap(bounce_);
  if (pd_ != nullptr) v.dealloc_pd(pd_);
  if (vctx_ != nullptr) v.close_device(vctx_);
}

bool Device::open() {
  const VerbsApi& v = api();
  const Config& cfg = ctx_.config();
  int n = 0;
  ibv_device** list = v.get_device_list(&n);
  for (int i = 0; list != nullptr && i < n && vctx_ == nullptr; ++i)
    if (info_.hca == v.get_device_name(list[i])) vctx_ = v.open_device(list[i]);
  if (list != nullptr) v.free_device_list(list);
  if (vctx_ == nullptr) {
    IB_WARN(log(), "%s: cannot open the device: %s", name().c_str(), std::strerror(errno));
    return false;
  }
  pd_ = v.alloc_pd(vctx_);
  chan_ = pd_ != nullptr ? v.create_comp_channel(vctx_) : nullptr;
  const ibv_device_attr& a = info_.dev_attr;
  const size_t srq_cap = std::min<size_t>(static_cast<size_t>(a.max_srq_wr), 8192);
  cq_size_ = std::min<size_t>(static_cast<size_t>(a.max_cqe), srq_cap + 4096);
  send_budget_ = cq_size_ > srq_cap ? cq_size_ - srq_cap : 0;
  if (chan_ != nullptr) cq_ = v.create_cq(vctx_, static_cast<int>(cq_size_), this, chan_, 0);
  if (cq_ != nullptr) {
    ibv_srq_init_attr sa{};
    sa.attr.max_wr = static_cast<uint32_t>(srq_cap);
    sa.attr.max_sge = 1;
    srq_ = v.create_srq(pd_, &sa);
  }
  if (srq_ == nullptr || send_budget_ < 64) {
    IB_WARN(log(),
            "%s: cannot allocate its protection domain, completion queue or shared "
            "receive queue: %s",
            name().c_str(), std::strerror(errno));
    return false;
  }
  int fl = fcntl(chan_->fd, F_GETFL);
  fcntl(chan_->fd, F_SETFL, fl | O_NONBLOCK);
  eager_ = cfg.eager_limit;
  bufsz_ = (sizeof(MsgHeader) + eager_ + 63) & ~size_t{63};
  credits_ = cfg.credits;
  chunk_ = std::min<size_t>(cfg.chunk, info_.attr.max_msg_sz);
  // The first send buffers now, so that the memory the device pins for itself is known from the
  // start (and a limit too low for it is said here, not at the first message).
  std::string why;
  if (!add_send_slots(&why)) {
    IB_WARN(log(), "%s: cannot register send buffers: %s", name().c_str(), why.c_str());
    return false;
  }
  // dma-buf: probed, not assumed (fd -1 gives EBADF where the kernel and driver support it).
  if (v.reg_dmabuf_mr != nullptr) {
    errno = 0;
    ibv_mr* mr = v.reg_dmabuf_mr(pd_, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE);
    if (mr != nullptr) v.dereg_mr(mr);
    info_.dmabuf = mr == nullptr && errno == EBADF;
  }
  IB_INFO(log(), "%s: %s, GID %d (%s), active MTU %d, %s, dma-buf %s", name().c_str(),
          ethernet() ? "RoCE" : "InfiniBand", info_.gid_index, gid_type_name(info_.gid_type),
          128 << info_.attr.active_mtu,
          info_.pci_path.empty() ? "software" : info_.pci_path.c_str(),
          info_.dmabuf ? "yes" : "no");
  PortDescription d;
  d.hca = info_.hca;
  d.port = info_.port;
  d.ethernet = ethernet();
  d.software = info_.pci_path.empty();
  d.fw_ver = std::string(info_.dev_attr.fw_ver,
                         strnlen(info_.dev_attr.fw_ver, sizeof info_.dev_attr.fw_ver));
  d.node_guid = info_.guid;
  d.lid = info_.attr.lid;
  d.gids = info_.gids;
  d.gid_index = info_.gid_index;
  d.gid_type = info_.gid_type;
  d.active_speed = info_.attr.active_speed;
  d.active_width = info_.attr.active_width;
  d.active_mtu = info_.attr.active_mtu;
  d.max_mtu = info_.attr.max_mtu;
  d.max_msg_sz = info_.attr.max_msg_sz;
  d.chunk = chunk_;
  d.dmabuf = info_.dmabuf;
  d.mem_ifaces = mem_ifaces();
  d.peermem = ctx_.peermem().text;
  link_layer_ = link_layer_text(d.ethernet, d.gid_type);
  details_ = describe_port(d);
  return true;
}

uint64_t Device::mem_ifaces() const {
  return HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_HOST);
}

void Device::fill_props(hmc_net_device_props_t* p) const {
  hmc_net_device_props_t full{};
  full.hdr = p->hdr;
  full.name = info_.name.c_str();
  full.pci_path = info_.pci_path.empty() ? nullptr : info_.pci_path.c_str();
  // Software devices (rdma_rxe, siw) report their netdev's speed, not what they move: leave
  // the bandwidth to the core's calibration there.
  full.bandwidth_MBps = info_.pci_path.empty()
                            ? 0
                            : port_bandwidth_MBps(info_.attr.active_speed, info_.attr.active_width);
  full.latency_ns = 0;
  full.flags = HMC_NET_FLAG_TAGGED | HMC_NET_FLAG_RMA | (info_.dmabuf ? HMC_NET_FLAG_DMABUF : 0u);
  full.max_inflight = 0;
  full.max_msg_size = 0;
  full.mem_ifaces = mem_ifaces();
  full.nic_guid = info_.guid;
  full.nic_port = static_cast<uint32_t>(info_.port);
  full.fabric = info_.fabric.empty() ? nullptr : info_.fabric.c_str();
  full.link_layer = link_layer_.c_str();
  full.details = details_.c_str();
  full.rma_mem_ifaces = ctx_.peermem().ifaces;
  size_t n = std::min<size_t>(p->hdr.struct_size, sizeof full);
  std::memcpy(static_cast<void*>(p), &full, n);
}

bool Device::map_chunk(Chunk* c, size_t bytes, int access, std::string* why) {
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    *why = std::strerror(errno);
    return false;
  }
  c->mr = reg(m, bytes, access, why);
  if (c->mr == nullptr) {
    munmap(m, bytes);
    return false;
  }
  c->mem = static_cast<uint8_t*>(m);
  c->bytes = bytes;
  return true;
}

bool Device::add_chunk(std::vector<Chunk>* chunks, size_t count, int access, std::string* why) {
  Chunk c;
  if (!map_chunk(&c, count * bufsz_, access, why)) return false;
  chunks->push_back(c);
  return true;
}

int Device::take_bounce(std::string* why) {
  if (bounce_.mem == nullptr) {
    if (!map_chunk(&bounce_, kBounceCount * kBounceSize, IBV_ACCESS_LOCAL_WRITE, why)) {
      *why = "no bounce buffer either: " + *why;
      return -2;
    }
    for (size_t i = kBounceCount; i-- > 0;) free_bounce_.push_back(static_cast<int>(i));
  }
  if (free_bounce_.empty()) return -1;
  int b = free_bounce_.back();
  free_bounce_.pop_back();
  return b;
}

void Device::release(const WrCtx& w) {
  if (w.slot >= 0) free_slots_.push_back(w.slot);
  if (w.bounce >= 0) free_bounce_.push_back(w.bounce);
  ctx_.mr_cache().release(w.reg);
}

uint8_t* Device::recv_buf(uint64_t id) {
  uint64_t i = id & ~kRecvBit;
  return recv_chunks_[i / kRecvChunk].mem + (i % kRecvChunk) * bufsz_;
}

void Device::post_recv(uint64_t id) {
  uint64_t i = id & ~kRecvBit;
  const Chunk& c = recv_chunks_[i / kRecvChunk];
  ibv_sge sge{reinterpret_cast<uintptr_t>(recv_buf(id)), static_cast<uint32_t>(bufsz_), c.mr->lkey};
  ibv_recv_wr wr{}, *bad = nullptr;
  wr.wr_id = id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  if (ibv_post_srq_recv(srq_, &wr, &bad) != 0)
    IB_ERROR(log(), "%s: cannot post a receive buffer: %s", name().c_str(), std::strerror(errno));
}

bool Device::grow_receive_pool() {
  size_t want = recv_posted_ + credits_ + 4;
  size_t cap = std::min<size_t>(static_cast<size_t>(info_.dev_attr.max_srq_wr), 8192);
  if (want > cap) {
    IB_WARN(log(),
            "%s: the shared receive queue is full (%zu buffers): more peers than it "
            "can grant %u credits each; senders may meet receiver-not-ready retries",
            name().c_str(), cap, credits_);
    return true;
  }
  while (recv_chunks_.size() * kRecvChunk < want) {
    std::string why;
    if (!add_chunk(&recv_chunks_, kRecvChunk, IBV_ACCESS_LOCAL_WRITE, &why)) {
      IB_ERROR(log(), "%s: cannot register receive buffers: %s", name().c_str(), why.c_str());
      return false;
    }
  }
  for (; recv_posted_ < want; ++recv_posted_) post_recv(kRecvBit | recv_posted_);
  return true;
}

bool Device::add_send_slots(std::string* why) {
  if (!add_chunk(&send_chunks_, kSendChunk, IBV_ACCESS_LOCAL_WRITE, why)) return false;
  size_t base = (send_chunks_.size() - 1) * kSendChunk;
  for (size_t i = kSendChunk; i-- > 0;) free_slots_.push_back(static_cast<int>(base + i));
  return true;
}

int Device::take_slot() {
  if (free_slots_.empty()) {
    // Every slot is in flight (the first ones were registered at open): more where the limit
    // allows, else wait for one to come back.
    std::string why;
    if (!add_send_slots(&why)) {
      IB_DEBUG(log(), "%s: no more send buffers: %s", name().c_str(), why.c_str());
      return -1;
    }
  }
  int s = free_slots_.back();
  free_slots_.pop_back();
  return s;
}

uint8_t* Device::slot_buf(int slot, uint32_t* lkey) {
  const Chunk& c = send_chunks_[static_cast<size_t>(slot) / kSendChunk];
  *lkey = c.mr->lkey;
  return c.mem + (static_cast<size_t>(slot) % kSendChunk) * bufsz_;
}

ibv_mr* Device::reg(void* addr, size_t len, int access, std::string* why) {
  ibv_mr* mr = api().reg_mr(pd_, addr, len, access);
  if (mr == nullptr) {
    int e = errno;
    *why = std::string("ibv_reg_mr of ") + std::to_string(len) + " bytes: " + std::strerror(e);
    rlimit rl{};
    if ((e == ENOMEM || e == EAGAIN || e == EPERM) && getrlimit(RLIMIT_MEMLOCK, &rl) == 0 &&
        rl.rlim_cur != RLIM_INFINITY)
      *why += " (RLIMIT_MEMLOCK is " + std::to_string(rl.rlim_cur) +
              " bytes: raise it, ulimit -l / LimitMEMLOCK=infinity)";
  }
  return mr;
}

PostResult Device::post(Endpoint* ep, ibv_qp* qp, const SendOp& op, std::string* why) {
  WrCtx w{ep, op, -1, nullptr};
  ibv_sge sge{};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = next_wr_;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  if (op.kind == WrKind::kMsg) {
    w.slot = take_slot();
    if (w.slot < 0) return PostResult::kBusy;
    uint8_t* b = slot_buf(w.slot, &sge.lkey);
    std::memcpy(b, &op.hdr, sizeof(MsgHeader));
    const auto type = static_cast<MsgType>(op.hdr.type);
    size_t payload = type == MsgType::kEager || type == MsgType::kFrag ? op.hdr.len : 0;
    if (payload > 0) std::memcpy(b + sizeof(MsgHeader), op.payload, payload);
    if (op.nrail_keys > 0) {
      payload = 4 * size_t{op.nrail_keys};
      std::memcpy(b + sizeof(MsgHeader), op.rail_keys.data(), payload);
    }
    sge.addr = reinterpret_cast<uintptr_t>(b);
    sge.length = static_cast<uint32_t>(sizeof(MsgHeader) + payload);
    if (sge.length <= inline_max_) wr.send_flags |= IBV_SEND_INLINE;
    wr.opcode = IBV_WR_SEND;
  } else if (op.kind == WrKind::kProbe) {
    // Zero-length: no memory on either side, no key checked (IBTA C9-88).
    wr.num_sge = 0;
    wr.opcode = IBV_WR_RDMA_WRITE;
  } else {
    sge.addr = op.local;
    sge.length = op.len;
    sge.lkey = op.lkey;
    if (op.bounce) {
      w.bounce = take_bounce(why);
      if (w.bounce == -1) return PostResult::kBusy;
      if (w.bounce < 0) return PostResult::kRegError;
      uint8_t* b = bounce_.mem + static_cast<size_t>(w.bounce) * kBounceSize;
      if (op.kind == WrKind::kPut) std::memcpy(b, reinterpret_cast<const void*>(op.local), op.len);
      sge.addr = reinterpret_cast<uintptr_t>(b);
      sge.lkey = bounce_.mr->lkey;
    } else if (op.reg_access >= 0) {
      w.reg = ctx_.mr_cache().acquire(*this, reinterpret_cast<void*>(op.local), op.len,
                                      op.reg_access, why);
      if (w.reg == nullptr) return PostResult::kRegError;
      sge.lkey = w.reg->mr->lkey;
    }
    wr.opcode = op.kind == WrKind::kPut ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
    wr.wr.rdma.remote_addr = op.remote;
    wr.wr.rdma.rkey = op.rkey;
  }
  int rc = ibv_post_send(qp, &wr, &bad);
  if (rc != 0) {
    release(w);
    *why = std::string("ibv_post_send: ") + std::strerror(rc);
    return PostResult::kQueueError;
  }
  wrs_.emplace(next_wr_++, w);
  return PostResult::kOk;
}

PostResult Device::post_chain(Endpoint* ep, ibv_qp* qp, const SendOp* ops, size_t n, size_t* posted,
                              std::string* why) {
  *posted = 0;
  std::vector<WrCtx> ctxs;
  std::vector<ibv_sge> sges(n);
  std::vector<ibv_send_wr> wrs(n);
  ctxs.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const SendOp& op = ops[i];
    WrCtx w{ep, op, -1, nullptr};
    sges[i].addr = op.local;
    sges[i].length = op.len;
    sges[i].lkey = op.lkey;
    if (op.reg_access >= 0) {
      w.reg = ctx_.mr_cache().acquire(*this, reinterpret_cast<void*>(op.local), op.len,
                                      op.reg_access, why);
      if (w.reg == nullptr) {
        if (i == 0) return PostResult::kRegError;
        break;  // the chain ends before it; it is posted (or staged) on its own later
      }
      sges[i].lkey = w.reg->mr->lkey;
    }
    ibv_send_wr& wr = wrs[i];
    wr.wr_id = next_wr_ + i;
    wr.sg_list = &sges[i];
    wr.num_sge = 1;
    wr.opcode = op.kind == WrKind::kPut ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
    wr.wr.rdma.remote_addr = op.remote;
    wr.wr.rdma.rkey = op.rkey;
    if (i > 0) wrs[i - 1].next = &wr;
    ctxs.push_back(w);
  }
  const size_t m = ctxs.size();
  wrs[m - 1].next = nullptr;
  wrs[m - 1].send_flags = IBV_SEND_SIGNALED;
  ctxs[m - 1].chain_first = next_wr_;
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(qp, wrs.data(), &bad);
  // On failure the work requests before `bad` went: they are on the books (their endpoint loses
  // the peer and forgets them), the others are released.
  const size_t went = rc == 0 ? m : static_cast<size_t>(bad - wrs.data());
  for (size_t i = 0; i < m; ++i) {
    if (i < went)
      wrs_.emplace(next_wr_ + i, ctxs[i]);
    else
      release(ctxs[i]);
  }
  next_wr_ += m;
  *posted = went;
  if (rc != 0) {
    *why = std::string("ibv_post_send: ") + std::strerror(rc);
    return PostResult::kQueueError;
  }
  return PostResult::kOk;
}

void Device::forget(Endpoint* ep) {
  for (auto it = wrs_.begin(); it != wrs_.end();) {
    if (it->second.ep == ep) {
      release(it->second);
      it = wrs_.erase(it);
    } else {
      ++it;
    }
  }
}

std::vector<SendOp> Device::take(Endpoint* ep, bool rma_qp) {
  std::vector<std::pair<uint64_t, SendOp>> found;
  for (auto it = wrs_.begin(); it != wrs_.end();) {
    if (it->second.ep == ep && it->second.op.rma_qp == rma_qp) {
      release(it->second);
      found.emplace_back(it->first, it->second.op);
      it = wrs_.erase(it);
    } else {
      ++it;
    }
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<SendOp> ops;
  for (auto& f : found) ops.push_back(f.second);
  return ops;
}

void Device::handle(const ibv_wc& wc) {
  if ((wc.wr_id & kRecvBit) != 0) {
    if (wc.status == IBV_WC_WR_FLUSH_ERR) return;  // the queue is being destroyed
    auto it = qps_.find(wc.qp_num);
    if (it != qps_.end() && wc.status == IBV_WC_SUCCESS) {
      bool rma = false;
      it->second->owns_qp(wc.qp_num, &rma);
      it->second->on_message(wc, rma, recv_buf(wc.wr_id), wc.byte_len);
    } else if (wc.status != IBV_WC_SUCCESS) {
      IB_WARN(log(), "%s: a receive failed: %s", name().c_str(), api().wc_status_str(wc.status));
    }
    post_recv(wc.wr_id);
    return;
  }
  auto it = wrs_.find(wc.wr_id);
  if (it == wrs_.end()) return;  // its endpoint is gone, or its queue pair was replaced
  WrCtx w = it->second;
  wrs_.erase(it);
  if (w.chain_first != 0 && wc.status == IBV_WC_SUCCESS) {
    // The unsignaled pieces before it completed first. (A failed one reports itself, signaled
    // or not; the ones before it stay on the books for the queue pair's replacement or loss.)
    for (uint64_t id = w.chain_first; id < wc.wr_id; ++id) {
      auto jt = wrs_.find(id);
      if (jt == wrs_.end()) continue;
      WrCtx prior = jt->second;
      wrs_.erase(jt);
      release(prior);
      ibv_wc pc = wc;
      pc.wr_id = id;
      prior.ep->on_send_complete(pc, prior);
    }
  }
  if (w.bounce >= 0 && wc.status == IBV_WC_SUCCESS && w.op.kind != WrKind::kPut)
    std::memcpy(reinterpret_cast<void*>(w.op.local),
                bounce_.mem + static_cast<size_t>(w.bounce) * kBounceSize, w.op.len);
  release(w);
  w.ep->on_send_complete(wc, w);
}

bool Device::poll() {
  bool any = false;
  ibv_wc wc[kPollBatch];
  for (int round = 0; round < 8; ++round) {
    int n = ibv_poll_cq(cq_, kPollBatch, wc);
    if (n <= 0) break;
    any = true;
    for (int i = 0; i < n; ++i) handle(wc[i]);
    if (n < kPollBatch) break;
  }
  return any;
}

void Device::drain_channel() {
  ibv_cq* cq = nullptr;
  void* cq_ctx = nullptr;
  while (api().get_cq_event(chan_, &cq, &cq_ctx) == 0) ++unacked_events_;
  if (unacked_events_ >= 64) {
    api().ack_cq_events(cq_, unacked_events_);
    unacked_events_ = 0;
  }
}

hmc_plugin_status_t Device::arm() {
  drain_channel();
  ibv_req_notify_cq(cq_, 0);
  // A completion that arrived before the request would not raise an event: look once more.
  return poll() ? HMC_PLUGIN_IN_PROGRESS : HMC_PLUGIN_SUCCESS;
}

}  // namespace hmc::ibverbs
