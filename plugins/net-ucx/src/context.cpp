#include "context.h"

#include <poll.h>
#include <sys/random.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <initializer_list>
#include <mutex>

#include "endpoint.h"
#include "listener.h"
#include "status.h"
#include "tags.h"

namespace hmc::ucx {

namespace {

// Transports that only reach processes on this host (UCT transport names).
bool is_local_transport(const std::string& tl) {
  static const char* const kLocal[] = {"self",     "posix",     "sysv",     "xpmem",    "knem",
                                       "cma",      "cuda_copy", "cuda_ipc", "gdr_copy", "rocm_copy",
                                       "rocm_ipc", "rocm_gdr",  "ze_copy",  "ze_ipc"};
  for (const char* l : kLocal)
    if (tl == l) return true;
  return false;
}

// Text that UCX prints into a FILE*, as a string.
template <typename F>
std::string capture(F&& print) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  if (f == nullptr) return "";
  print(f);
  std::fclose(f);
  std::string s(buf != nullptr ? buf : "", len);
  std::free(buf);
  return s;
}

// The value UCX holds for one of its variables ("TLS" -> the value of UCX_TLS).
std::string ucx_setting(ucp_config_t* cfg, const char* name) {
  std::string text =
      capture([&](FILE* f) { ucp_config_print(cfg, f, nullptr, UCS_CONFIG_PRINT_CONFIG); });
  std::string key = std::string("UCX_") + name + "=";
  size_t pos = 0;
  while ((pos = text.find(key, pos)) != std::string::npos) {
    if (pos == 0 || text[pos - 1] == '\n') {
      size_t end = text.find('\n', pos);
      return text.substr(pos + key.size(), end == std::string::npos ? end : end - pos - key.size());
    }
    pos += key.size();
  }
  return "";
}

// Whether a UCX_TLS value may open one of `names` (or an alias that includes them).
bool tls_may_use(const std::string& tls, std::initializer_list<const char*> names) {
  if (tls.empty() || tls[0] == '^') return true;
  size_t b = 0;
  while (b <= tls.size()) {
    size_t e = tls.find(',', b);
    if (e == std::string::npos) e = tls.size();
    std::string t = tls.substr(b, e - b);
    if (t == "all" || t == "sm" || t == "shm") return true;
    for (const char* n : names)
      if (t == n) return true;
    b = e + 1;
  }
  return false;
}

// UCX 1.13 reads memory-domain settings (unlike transport settings) only from the environment,
// when ucp_init runs: UCX_CMA_MEMORY_INVALIDATE can only be declared there. Done once per
// process, and never over a value the user set.
void declare_cma_invalidate(const Log& log) {
  static std::once_flag once;
  std::call_once(once, [&log] {
    if (std::getenv("UCX_CMA_MEMORY_INVALIDATE") != nullptr) {
      UX_DEBUG(log, "UCX_CMA_MEMORY_INVALIDATE is set by the user (%s): left as is",
               std::getenv("UCX_CMA_MEMORY_INVALIDATE"));
      return;
    }
    if (::setenv("UCX_CMA_MEMORY_INVALIDATE", "y", 0) == 0)
      UX_DEBUG(log,
               "set UCX_CMA_MEMORY_INVALIDATE=y in the environment (cma rendezvous for "
               "endpoints with peer error handling)");
  });
}

std::string feature_names(uint64_t f) {
  std::string s;
  auto add = [&](uint64_t bit, const char* n) {
    if (f & bit) s += (s.empty() ? "" : "|") + std::string(n);
  };
  add(UCP_FEATURE_TAG, "TAG");
  add(UCP_FEATURE_RMA, "RMA");
  add(UCP_FEATURE_WAKEUP, "WAKEUP");
  return s;
}

}  // namespace

hmc_plugin_status_t Context::create(const hmc_host_services_t* host, Context** out) {
  std::unique_ptr<Context> c(new Context(host));
  hmc_plugin_status_t st = c->init();
  if (st != HMC_PLUGIN_SUCCESS) return st;
  *out = c.release();
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Context::init() {
  if (!cfg_.read(host_, log_)) return HMC_PLUGIN_ERR_CONFIG;  // the reader logged which variable
  self_ = ProcessIdentity::self();
  if (getrandom(&rng_state_, sizeof(rng_state_), 0) != static_cast<ssize_t>(sizeof(rng_state_)))
    rng_state_ = now_ns() ^ (static_cast<uint64_t>(self_.pid) << 32);
  id_used_.assign(tags::kMaxId + 1, false);
  id_used_[0] = true;

  ucp_config_t* cfg = nullptr;
  ucs_status_t us = ucp_config_read(nullptr, nullptr, &cfg);
  if (us != UCS_OK) {
    UX_WARN(log_, "UCX cannot read its configuration (%s); the plugin is not used",
            ucs_status_string(us));
    return HMC_PLUGIN_ERR_NO_DEVICE;
  }
  struct Release {
    ucp_config_t* c;
    ~Release() { ucp_config_release(c); }
  } release{cfg};

  struct Pass {
    const char* hmc;
    const char* ucx;
    const std::string& value;
  };
  for (const Pass& p : {Pass{"HMC_UCX_TLS", "TLS", cfg_.tls},
                        Pass{"HMC_UCX_NET_DEVICES", "NET_DEVICES", cfg_.net_devices}}) {
    if (p.value.empty()) continue;
    us = ucp_config_modify(cfg, p.ucx, p.value.c_str());
    if (us != UCS_OK) {
      log_.write(HMC_LOG_ERROR, "%s=\"%s\": UCX refuses it as UCX_%s (%s)", p.hmc, p.value.c_str(),
                 p.ucx, ucs_status_string(us));
      return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    }
  }
  // A peer on another host that dies silently is noticed through UCX's keepalive: make it
  // answer within about the core's timeout (UCX's default interval is 20 s).
  uint32_t ka_ms = std::min<uint32_t>(20000, std::max<uint32_t>(100, host_->timeout_ms / 4));
  char ka[32];
  std::snprintf(ka, sizeof(ka), "%ums", ka_ms);
  us = ucp_config_modify(cfg, "KEEPALIVE_INTERVAL", ka);
  if (us != UCS_OK)
    UX_DEBUG(log_, "UCX_KEEPALIVE_INTERVAL=%s not applied: %s", ka, ucs_status_string(us));
  // Endpoints use UCP_ERR_HANDLING_MODE_PEER. UCX 1.13 grants its shared-memory transports to
  // such endpoints only when they declare error handling (UCX_{POSIX,SYSV}_ERROR_HANDLING=y;
  // without it there is no shared-memory path at all), and uses cma for rendezvous only when
  // the cma memory domain declares memory invalidation (UCX_CMA_MEMORY_INVALIDATE=y; without it
  // large messages crawl through the posix FIFO at a few MB/s). Neither declaration adds a
  // mechanism: a same-host peer's death is noticed by identity.h.
  std::string tls = cfg_.tls.empty() ? ucx_setting(cfg, "TLS") : cfg_.tls;
  // auto: UCX's error handling costs network transports a good part of their bandwidth (UCX
  // 1.13 keeps one tcp lane and adds keepalive); it is needed only where a peer's death can
  // abort this process (shared memory, cma). Elsewhere the process watch and the core's
  // control plane find dead peers.
  if (cfg_.error_mode_auto)
    cfg_.peer_errors = tls_may_use(tls, {"mm", "posix", "sysv", "cma", "xpmem", "knem"});
  if (cfg_.peer_errors && tls_may_use(tls, {"mm", "posix", "sysv"})) {
    us = ucp_config_modify(cfg, "MM_ERROR_HANDLING", "y");
    if (us != UCS_OK)
      UX_DEBUG(log_, "UCX_MM_ERROR_HANDLING=y not applied: %s", ucs_status_string(us));
  }
  if (cfg_.peer_errors && tls_may_use(tls, {"cma"})) declare_cma_invalidate(log_);
  return init_ucp(cfg);
}

hmc_plugin_status_t Context::init_ucp(ucp_config_t* cfg) {
  const uint64_t base = UCP_FEATURE_TAG;
  std::vector<uint64_t> tries;
  if (cfg_.wakeup) tries.push_back(base | UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP);
  tries.push_back(base | UCP_FEATURE_RMA);
  if (cfg_.wakeup) tries.push_back(base | UCP_FEATURE_WAKEUP);
  tries.push_back(base);
  ucs_status_t first = UCS_OK;
  uint64_t features = 0;
  for (uint64_t f : tries) {
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
    params.features = f;
    params.name = "hmc";
    ucs_status_t us = ucp_init(&params, cfg, &ucp_);
    if (us == UCS_OK) {
      features = f;
      break;
    }
    ucp_ = nullptr;
    if (first == UCS_OK) first = us;
    UX_DEBUG(log_, "ucp_init with features %s failed: %s", feature_names(f).c_str(),
             ucs_status_string(us));
    // No transport or device at all: fewer features would not help (and UCX would print the
    // same complaint once per attempt).
    if (us == UCS_ERR_NO_DEVICE || us == UCS_ERR_NO_ELEM) break;
  }
  const std::string tls_text = cfg_.tls.empty() ? "UCX's own UCX_TLS" : "UCX_TLS=" + cfg_.tls;
  if (ucp_ == nullptr) {
    UX_WARN(log_, "UCX %s cannot start here: ucp_init failed (%s, %s); the plugin is not used",
            ucp_get_version_string(), ucs_status_string(first), tls_text.c_str());
    return HMC_PLUGIN_ERR_NO_DEVICE;
  }
  rma_ = (features & UCP_FEATURE_RMA) != 0;
  bool wakeup = (features & UCP_FEATURE_WAKEUP) != 0;
  if (!rma_)
    UX_WARN(log_,
            "one-sided operations (put/get) are not offered: UCX could not start with "
            "UCP_FEATURE_RMA (%s); the core uses another plugin for them",
            ucs_status_string(first));
  if (cfg_.wakeup && !wakeup)
    UX_INFO(log_, "no wait fd: UCX could not start with UCP_FEATURE_WAKEUP; the core polls");

  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (ucp_context_query(ucp_, &attr) == UCS_OK) {
    if (attr.memory_types & (1ull << UCS_MEMORY_TYPE_CUDA))
      mem_ifaces_ |= HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_CUDA);
    if (attr.memory_types & (1ull << UCS_MEMORY_TYPE_ROCM))
      mem_ifaces_ |= HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_ROCM);
  }

  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  // The core serialises every call into a context, possibly from different threads.
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  ucs_status_t us = ucp_worker_create(ucp_, &wp, &worker_);
  if (us != UCS_OK) {
    worker_ = nullptr;
    UX_WARN(log_, "UCX %s cannot create a worker here (%s, %s); the plugin is not used",
            ucp_get_version_string(), ucs_status_string(us), tls_text.c_str());
    return HMC_PLUGIN_ERR_NO_DEVICE;
  }
  if (wakeup && ucp_worker_get_efd(worker_, &efd_) != UCS_OK) efd_ = -1;

  ucp_address_t* a = nullptr;
  size_t alen = 0;
  us = ucp_worker_get_address(worker_, &a, &alen);
  if (us != UCS_OK) {
    UX_WARN(log_, "UCX cannot tell its worker address (%s); the plugin is not used",
            ucs_status_string(us));
    return HMC_PLUGIN_ERR_NO_DEVICE;
  }
  full_address_.assign(reinterpret_cast<uint8_t*>(a), reinterpret_cast<uint8_t*>(a) + alen);
  ucp_worker_release_address(worker_, a);
  std::vector<uint8_t> net_only;
  ucp_worker_attr_t wa{};
  wa.field_mask = UCP_WORKER_ATTR_FIELD_ADDRESS | UCP_WORKER_ATTR_FIELD_ADDRESS_FLAGS;
  wa.address_flags = UCP_WORKER_ADDRESS_FLAG_NET_ONLY;
  if (ucp_worker_query(worker_, &wa) == UCS_OK && wa.address != nullptr) {
    auto* p = reinterpret_cast<uint8_t*>(wa.address);
    net_only.assign(p, p + wa.address_length);
    ucp_worker_release_address(worker_, wa.address);
  }
  describe_resources();

  // A handle carries the address in at most HMC_NET_HANDLE_MAX bytes.
  const size_t room = HMC_NET_HANDLE_MAX - wire::kHandleHeader;
  if (full_address_.size() <= room) {
    handle_address_ = full_address_;
  } else if (!same_host_only_ && !net_only.empty() && net_only.size() <= room) {
    handle_address_ = net_only;
    handle_address_net_only_ = true;
    UX_INFO(log_,
            "the worker address (%zu bytes) does not fit in a %u-byte connection handle; "
            "handles carry its network transports only (%zu bytes), so peers reach this "
            "context over the network even on the same host",
            full_address_.size(), HMC_NET_HANDLE_MAX, net_only.size());
  } else {
    UX_WARN(log_,
            "the worker address (%zu bytes; %zu with network transports only) does not "
            "fit in a %u-byte connection handle: listening will fail; restrict the transports "
            "(HMC_UCX_TLS) or devices (HMC_UCX_NET_DEVICES)",
            full_address_.size(), net_only.size(), HMC_NET_HANDLE_MAX);
  }
  std::string kinds = "host";
  if (mem_ifaces_ & HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_CUDA)) kinds += ", cuda";
  if (mem_ifaces_ & HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_ROCM)) kinds += ", rocm";
  UX_INFO(log_,
          "UCX %s ready: transports %s (%s); memory %s; put/get %s; wait fd %s; error "
          "mode %s; worker address %zu bytes",
          ucp_get_version_string(), transports_.empty() ? "?" : transports_.c_str(),
          same_host_only_ ? "this host only" : "network", kinds.c_str(), rma_ ? "on" : "off",
          efd_ >= 0 ? "on" : "off", cfg_.peer_errors ? "peer" : "none", full_address_.size());
  if (!cfg_.peer_errors && !cfg_.error_mode_auto)
    UX_WARN(log_,
            "HMC_UCX_ERROR_MODE=none: UCX does not report broken connections, and UCX "
            "1.13 aborts this process if a shared-memory peer dies during a cma transfer");
  return HMC_PLUGIN_SUCCESS;
}

// Lists the transports UCX chose ("resource N : md M dev D flags -- tcp/lo" lines of
// ucp_context_print_info) and whether all of them stay on this host.
void Context::describe_resources() {
  std::string text = capture([&](FILE* f) { ucp_context_print_info(ucp_, f); });
  bool any = false, any_net = false;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    size_t r = line.find("resource");
    size_t d = line.find("-- ");
    if (r == std::string::npos || d == std::string::npos) continue;
    std::string res = line.substr(d + 3);
    while (!res.empty() && (res.back() == ' ' || res.back() == '\r')) res.pop_back();
    if (res.empty()) continue;
    transports_ += (transports_.empty() ? "" : " ") + res;
    any = true;
    if (!is_local_transport(res.substr(0, res.find('/')))) any_net = true;
  }
  same_host_only_ = any && !any_net;
}

Context::~Context() {
  while (!listeners_.empty()) delete listeners_.back();
  while (!eps_.empty()) delete eps_.back();
  service_lingering(true);
  if (worker_ != nullptr) {
    uint64_t deadline = now_ns() + kCloseBudgetNs;
    while (!closing_.empty() && now_ns() < deadline) {
      ucp_worker_progress(worker_);
      reap_closing();
    }
  }
  for (void* cr : closing_) ucp_request_free(cr);
  closing_.clear();
  // Messages nobody will receive any more (for closed endpoints and listeners): UCX would warn
  // about each one when the worker goes.
  if (worker_ != nullptr) drain(0, 0);
  for (RemoteKey* k : rkeys_) {
    if (k->rkey != nullptr) ucp_rkey_destroy(k->rkey);
    delete k;
  }
  rkeys_.clear();
  for (MemRegion* m : mrs_) {
    if (m->memh != nullptr) ucp_mem_unmap(ucp_, m->memh);
    delete m;
  }
  mrs_.clear();
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (ucp_ != nullptr) ucp_cleanup(ucp_);
}

void Context::fill_props(hmc_net_device_props_t* props) const {
  using P = hmc_net_device_props_t;
  if (HMC_ABI_HAS_FIELD(props, P, name)) props->name = "ucx";
  if (HMC_ABI_HAS_FIELD(props, P, pci_path)) props->pci_path = nullptr;
  // 0 = unknown: the transports UCX picks per peer (shared memory, tcp over loopback or a NIC,
  // RDMA) differ by orders of magnitude, so the core calibrates.
  if (HMC_ABI_HAS_FIELD(props, P, bandwidth_MBps)) props->bandwidth_MBps = 0;
  if (HMC_ABI_HAS_FIELD(props, P, latency_ns)) props->latency_ns = 0;
  if (HMC_ABI_HAS_FIELD(props, P, mem_ifaces)) props->mem_ifaces = mem_ifaces_;
  if (HMC_ABI_HAS_FIELD(props, P, nic_guid)) props->nic_guid = 0;
  if (HMC_ABI_HAS_FIELD(props, P, nic_port)) props->nic_port = 0;
  if (HMC_ABI_HAS_FIELD(props, P, flags))
    props->flags = HMC_NET_FLAG_TAGGED | (rma_ ? HMC_NET_FLAG_RMA : 0u) |
                   (same_host_only_ ? HMC_NET_FLAG_SAME_HOST : 0u);
  if (HMC_ABI_HAS_FIELD(props, P, max_inflight)) props->max_inflight = 0;
  if (HMC_ABI_HAS_FIELD(props, P, max_msg_size)) props->max_msg_size = 0;
}

uint64_t Context::random64() {
  // xorshift64*, seeded from getrandom: nonces only need to differ between connections.
  uint64_t x = rng_state_ ? rng_state_ : 0x9e3779b97f4a7c15ull;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  rng_state_ = x;
  uint64_t v = x * 0x2545f4914f6cdd1dull;
  return v ? v : 1;
}

// --- progress ----------------------------------------------------------------------------

UX_HOT void Context::progress() {
  ucp_worker_progress(worker_);
  skips_ = 0;
  if (!attention_.empty()) service();
  if (!lingering_.empty()) service_lingering(false);
  if (++ticks_ >= 64) {
    ticks_ = 0;
    periodic();
  }
}

void Context::service() {
  while (!attention_.empty()) {
    std::vector<Endpoint*> list;
    list.swap(attention_);
    for (Endpoint* ep : list) {
      ep->in_attention = false;
      ep->service();
    }
  }
}

void Context::periodic() {
  uint64_t now = now_ns();
  if (now < next_periodic_ns_) return;
  next_periodic_ns_ = now + kPeriodicNs;
  check_liveness();
  reap_closing();
}

void Context::check_liveness() {
  std::vector<struct pollfd> fds;
  std::vector<Endpoint*> who;
  for (Endpoint* ep : eps_) {
    if (!ep->watching() || ep->failed()) continue;
    if (ep->watch().fd() >= 0) {
      fds.push_back({ep->watch().fd(), POLLIN, 0});
      who.push_back(ep);
    } else if (!ep->watch().alive()) {
      ep->schedule_failure("the peer process (pid " + std::to_string(ep->peer_pid()) + ") exited");
    }
  }
  if (!fds.empty() && ::poll(fds.data(), fds.size(), 0) > 0) {
    for (size_t i = 0; i < fds.size(); ++i)
      if (fds[i].revents != 0)
        who[i]->schedule_failure("the peer process (pid " + std::to_string(who[i]->peer_pid()) +
                                 ") exited");
  }
  if (!attention_.empty()) service();
}

hmc_plugin_status_t Context::arm() {
  if (efd_ < 0) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
  if (unreported_ > 0 || !attention_.empty()) return HMC_PLUGIN_IN_PROGRESS;
  ucs_status_t us = ucp_worker_arm(worker_);
  if (us == UCS_OK) return HMC_PLUGIN_SUCCESS;
  if (us == UCS_ERR_BUSY) return HMC_PLUGIN_IN_PROGRESS;
  UX_ERROR(log_, "ucp_worker_arm failed: %s", ucs_status_string(us));
  return HMC_PLUGIN_ERR_INTERNAL;
}

// --- requests ----------------------------------------------------------------------------

UX_HOT void Context::finish(Request* r, hmc_plugin_status_t st) {
  r->done = true;
  r->result = st;
  if (st == HMC_PLUGIN_SUCCESS &&
      (r->kind == ReqKind::kSend || r->kind == ReqKind::kPut || r->kind == ReqKind::kGet))
    r->bytes = r->len;
  if (r->ep != nullptr) r->ep->unlink(r);
  if (r->kind != ReqKind::kControl) {
    r->counted = true;
    ++unreported_;
  }
  if (r->on_done != nullptr) r->on_done(r);
}

UX_HOT void Context::complete(Request* r) {
  if (r->orphan) {
    if (r->kind != ReqKind::kControl) --data_orphans_;
    pool_.put(r);
    return;
  }
  if (r->done) return;  // ended earlier (its endpoint failed)
  const ucs_status_t us = r->ucx_status;
  hmc_plugin_status_t st;
  if (us == UCS_OK) {
    st = HMC_PLUGIN_SUCCESS;
  } else if (us == UCS_ERR_CANCELED) {
    // Cancelled on request, or by us because the endpoint failed or closed.
    st = r->user_cancel ? HMC_PLUGIN_ERR_CANCELLED : HMC_PLUGIN_ERR_PEER_LOST;
  } else if (us == UCS_ERR_MESSAGE_TRUNCATED) {
    st = HMC_PLUGIN_ERR_TRUNCATED;
  } else if (r->ep != nullptr && r->ep->failed()) {
    st = HMC_PLUGIN_ERR_PEER_LOST;
  } else {
    st = from_ucs(us);
    if (st != HMC_PLUGIN_ERR_PEER_LOST)
      UX_WARN(log_, "a UCX operation failed: %s", ucs_status_string(us));
  }
  Endpoint* ep = r->ep;
  finish(r, st);
  // A broken connection takes every other request of the endpoint with it.
  if (st == HMC_PLUGIN_ERR_PEER_LOST && ep != nullptr && !ep->failed() && us != UCS_ERR_CANCELED)
    ep->schedule_failure(std::string("UCX reports the connection broken (") +
                         ucs_status_string(us) + ")");
}

UX_HOT void Context::release(Request* r) {
  if (r->counted) {
    r->counted = false;
    --unreported_;
  }
  if (r->outstanding > 0) {
    r->orphan = true;
    if (r->kind != ReqKind::kControl) ++data_orphans_;
  } else {
    pool_.put(r);
  }
}

void Context::abandon(Request* r) {
  if (r->ep != nullptr) r->ep->unlink(r);
  r->on_done = nullptr;
  release(r);
}

UX_HOT ucs_status_t Context::absorb(Request* r, void* s) {
  // A request pointer: pending, or (NO_IMM_CMPL) already called back inside the call; either
  // way its callback accounts for it.
  if (s == nullptr) {
    --r->outstanding;
    return UCS_OK;
  }
  if (UCS_PTR_IS_ERR(s)) {
    --r->outstanding;
    ucs_status_t us = UCS_PTR_STATUS(s);
    if (r->ucx_status == UCS_OK) r->ucx_status = us;
    return us;
  }
  return UCS_OK;
}

Request* Context::post_control_recv(uint64_t tag, size_t cap, void* owner,
                                    void (*on_done)(Request*)) {
  Request* r = new_request(ReqKind::kControl);
  r->owner = owner;
  r->on_done = on_done;
  r->payload.resize(cap);
  r->len = cap;
  ucp_request_param_t p{};
  p.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  p.cb.recv = recv_cb;
  p.user_data = r;
  ++r->outstanding;
  void* s = ucp_tag_recv_nbx(worker_, r->payload.data(), cap, tag, tags::kFullMask, &p);
  if (s != nullptr && !UCS_PTR_IS_ERR(s) && r->outstanding > 0) r->ucx = s;
  absorb(r, s);
  if (r->outstanding == 0) complete(r);
  return r;
}

Request* Context::post_control_send(ucp_ep_h uep, uint64_t tag, std::vector<uint8_t>&& bytes) {
  Request* r = new_request(ReqKind::kControl);
  r->payload = std::move(bytes);
  r->len = r->payload.size();
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = send_cb;
  p.user_data = r;
  ++r->outstanding;
  void* s = ucp_tag_send_nbx(uep, r->payload.data(), r->payload.size(), tag, &p);
  absorb(r, s);
  if (r->outstanding == 0) complete(r);
  return r;
}

UX_HOT void Context::send_cb(void* ucx_req, ucs_status_t st, void* user) {
  // Freeing inside the callback is allowed: UCX recycles the request once the callback returns.
  ucp_request_free(ucx_req);
  auto* r = static_cast<Request*>(user);
  if (st != UCS_OK && r->ucx_status == UCS_OK) r->ucx_status = st;
  if (--r->outstanding == 0) r->ctx->complete(r);
}

UX_HOT void Context::recv_cb(void* ucx_req, ucs_status_t st, const ucp_tag_recv_info_t* info,
                             void* user) {
  ucp_request_free(ucx_req);
  auto* r = static_cast<Request*>(user);
  r->ucx = nullptr;
  // info->length is the sender's length, also when the message was truncated (net.h: a
  // truncated receive reports the length that was sent).
  if ((st == UCS_OK || st == UCS_ERR_MESSAGE_TRUNCATED) && info != nullptr) r->bytes = info->length;
  if (st != UCS_OK && r->ucx_status == UCS_OK) r->ucx_status = st;
  if (--r->outstanding == 0) r->ctx->complete(r);
}

void Context::ep_error_cb(void* arg, ucp_ep_h uep, ucs_status_t st) {
  auto* c = static_cast<Context*>(arg);
  auto it = c->by_uep_.find(uep);
  if (it != c->by_uep_.end()) {
    it->second->schedule_failure(std::string("UCX reports the connection broken (") +
                                 ucs_status_string(st) + ")");
    return;
  }
  for (Lingering& l : c->lingering_)
    if (l.uep == uep) l.deadline_ns = 0;  // closed at the next progress
}

// --- ids ---------------------------------------------------------------------------------

uint16_t Context::alloc_id() {
  for (uint32_t n = 0; n < tags::kMaxId; ++n) {
    uint32_t id = next_id_;
    next_id_ = next_id_ >= tags::kMaxId ? 1 : next_id_ + 1;
    if (id_used_[id]) continue;
    id_used_[id] = true;
    drain_id(static_cast<uint16_t>(id));
    return static_cast<uint16_t>(id);
  }
  return 0;
}

void Context::free_id(uint16_t id) {
  if (id == 0) return;
  drain_id(id);
  id_used_[id] = false;
}

namespace {
void discard_cb(void* ucx_req, ucs_status_t, const ucp_tag_recv_info_t*, void*) {
  ucp_request_free(ucx_req);
}
}  // namespace

// Receives (into nothing) every message already queued for `id`: left over from an endpoint that
// closed, they must not reach the next endpoint that gets the id.
void Context::drain_id(uint16_t id) {
  int dropped =
      drain(tags::data_of_id(id), tags::kDataOfIdMask) + drain(id, tags::kControlOfIdMask);
  if (dropped > 0)
    UX_DEBUG(log_, "dropped %d stale message(s) addressed to endpoint id %u", dropped, id);
}

int Context::drain(uint64_t tag, uint64_t mask) {
  if (worker_ == nullptr) return 0;
  int dropped = 0;
  for (int i = 0; i < 100000; ++i) {
    ucp_tag_recv_info_t info{};
    ucp_tag_message_h m = ucp_tag_probe_nb(worker_, tag, mask, 1, &info);
    if (m == nullptr) break;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK;
    p.cb.recv = discard_cb;
    void* s = ucp_tag_msg_recv_nbx(worker_, nullptr, 0, m, &p);
    (void)s;  // done at once, failed (truncated: expected), or completes in discard_cb
    ++dropped;
  }
  return dropped;
}

// --- endpoints ---------------------------------------------------------------------------

void Context::add_endpoint(Endpoint* ep, ucp_ep_h uep) {
  eps_.push_back(ep);
  if (uep != nullptr) by_uep_[uep] = ep;
}

void Context::remove_endpoint(Endpoint* ep, ucp_ep_h uep) {
  auto it = std::find(eps_.begin(), eps_.end(), ep);
  if (it != eps_.end()) {
    *it = eps_.back();
    eps_.pop_back();
  }
  if (uep != nullptr) by_uep_.erase(uep);
  unattend(ep);
}

void Context::remove_listener(Listener* l) {
  auto it = std::find(listeners_.begin(), listeners_.end(), l);
  if (it != listeners_.end()) listeners_.erase(it);
}

void Context::attend(Endpoint* ep) {
  if (ep->in_attention) return;
  ep->in_attention = true;
  attention_.push_back(ep);
}

void Context::unattend(Endpoint* ep) {
  if (!ep->in_attention) return;
  ep->in_attention = false;
  attention_.erase(std::remove(attention_.begin(), attention_.end(), ep), attention_.end());
}

void Context::close_ucp_ep(ucp_ep_h uep) {
  by_uep_.erase(uep);
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_EP_CLOSE_FLAG_FORCE;
  void* cr = ucp_ep_close_nbx(uep, &p);
  if (cr != nullptr && !UCS_PTR_IS_ERR(cr)) closing_.push_back(cr);
}

void Context::linger(ucp_ep_h uep, Request* bye) {
  by_uep_.erase(uep);
  lingering_.push_back({uep, bye, now_ns() + kLingerNs});
}

void Context::service_lingering(bool force_all) {
  uint64_t now = force_all ? 0 : now_ns();
  for (size_t i = 0; i < lingering_.size();) {
    Lingering l = lingering_[i];
    if (!force_all && !l.bye->done && now < l.deadline_ns) {
      ++i;
      continue;
    }
    lingering_[i] = lingering_.back();
    lingering_.pop_back();
    abandon(l.bye);
    close_ucp_ep(l.uep);
  }
}

void Context::reap_closing() {
  for (size_t i = 0; i < closing_.size();) {
    if (ucp_request_check_status(closing_[i]) == UCS_INPROGRESS) {
      ++i;
      continue;
    }
    ucp_request_free(closing_[i]);
    closing_[i] = closing_.back();
    closing_.pop_back();
  }
}

}  // namespace hmc::ucx
