// Device: one opened provider/domain, its lifetime, opening (fabric, domain, CQ, AV, endpoint)
// and its properties. The other concerns are beside it: completions.cpp (progress and
// completions), posting.cpp (requests, posting and the backlog), address_vector.cpp (addresses
// and receive slots), memory.cpp (bounce pool and memory registration).
#include "device.h"

#include <rdma/fi_cm.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "context.h"
#include "util.h"
#include "wire.h"

namespace hmc::ofi {
namespace {

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
}  // namespace hmc::ofi
