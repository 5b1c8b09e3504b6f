#include "context.h"

#include <arpa/inet.h>
#include <endian.h>
#include <ifaddrs.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>

#include "endpoint.h"
#include "listener.h"
#include "region.h"

namespace hmc::ibverbs {
namespace {

const char* port_state_name(ibv_port_state s) {
  switch (s) {
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT";
    case IBV_PORT_ARMED: return "ARMED";
    case IBV_PORT_ACTIVE: return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
    default: return "unknown";
  }
}

std::string read_line(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

// The GID table of a port, with each entry's type (from the verbs library where it has
// _ibv_query_gid_ex, else from sysfs).
std::vector<GidEntry> gid_table(const VerbsApi& v, ibv_context* c, const std::string& hca, int port,
                                int len) {
  std::vector<GidEntry> t;
  for (int i = 0; i < std::min(len, 256); ++i) {
    GidEntry e;
    e.index = i;
    ibv_gid gid{};
    if (v.query_gid(c, static_cast<uint8_t>(port), i, &gid) != 0) continue;
    std::memcpy(e.raw, gid.raw, 16);
    if (gid_is_zero(e.raw)) continue;
    ibv_gid_entry ge{};
    std::string type;
    if (v.query_gid_ex != nullptr &&
        v.query_gid_ex(c, static_cast<uint32_t>(port), static_cast<uint32_t>(i), &ge, 0,
                       sizeof ge) == 0) {
      e.type = ge.gid_type == IBV_GID_TYPE_ROCE_V2   ? GidType::kRoceV2
               : ge.gid_type == IBV_GID_TYPE_ROCE_V1 ? GidType::kRoceV1
                                                     : GidType::kIb;
    } else {
      type = read_line("/sys/class/infiniband/" + hca + "/ports/" + std::to_string(port) +
                       "/gid_attrs/types/" + std::to_string(i));
      e.type = type == "RoCE v2"                        ? GidType::kRoceV2
               : type.find("RoCE") != std::string::npos ? GidType::kRoceV1
                                                        : GidType::kIb;
    }
    e.netdev = read_line("/sys/class/infiniband/" + hca + "/ports/" + std::to_string(port) +
                         "/gid_attrs/ndevs/" + std::to_string(i));
    t.push_back(e);
  }
  return t;
}

// The prefix length of the IPv4 address an IPv4-mapped GID holds on its interface, -1 when
// the interface does not have it (or is unknown).
int ipv4_prefix(const std::string& netdev, const uint8_t gid[16]) {
  if (netdev.empty() || !gid_is_ipv4_mapped(gid)) return -1;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return -1;
  int bits = -1;
  for (ifaddrs* a = list; a != nullptr && bits < 0; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_netmask == nullptr || a->ifa_addr->sa_family != AF_INET ||
        netdev != a->ifa_name)
      continue;
    const auto* addr = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (std::memcmp(&addr->sin_addr, gid + 12, 4) != 0) continue;
    const auto* mask = reinterpret_cast<const sockaddr_in*>(a->ifa_netmask);
    bits = __builtin_popcount(mask->sin_addr.s_addr);
  }
  freeifaddrs(list);
  return bits;
}

}  // namespace

hmc_plugin_status_t Context::create(const hmc_host_services_t* host, Context** out) {
  std::unique_ptr<Context> c(new Context(host));
  hmc_plugin_status_t st = load_config(host, c->log_, &c->cfg_);
  if (st != HMC_PLUGIN_SUCCESS) return st;
  c->rc_timeout_ =
      c->cfg_.timeout >= 0 ? c->cfg_.timeout : timeout_for(host->timeout_ms, c->cfg_.retry_cnt);
  c->peermem_ = detect_peermem(c->cfg_.peermem, "/sys");
  st = c->discover();
  if (st != HMC_PLUGIN_SUCCESS) return st;
  IB_INFO(c->log_, "peermem (device memory by pointer for puts and gets): %s",
          c->peermem_.text.c_str());
  c->cache_ = std::make_unique<MrCache>(c->api_, c->log_, c->cfg_.mr_cache);
  c->epfd_ = epoll_create1(EPOLL_CLOEXEC);
  if (c->epfd_ < 0) {
    IB_ERROR(c->log_, "epoll_create1: %s", std::strerror(errno));
    return HMC_PLUGIN_ERR_SYSTEM;
  }
  for (auto& d : c->devices_) c->watch(d->channel_fd());
  std::random_device rd;
  c->rng_ = (uint64_t{rd()} << 32) ^ rd() ^ static_cast<uint64_t>(getpid());
  *out = c.release();
  return HMC_PLUGIN_SUCCESS;
}

std::string Context::cfg_hca_text() const {
  const char* v = host_->config_get(host_->host_ctx, "HMC_IB_HCA");
  return v != nullptr ? v : "";
}

hmc_plugin_status_t Context::discover() {
  std::string why;
  auto none = [&](const std::string& reason) {
    IB_INFO(log_, "%s", reason.c_str());  // the core's loader shows it as "no device: ..."
    return HMC_PLUGIN_ERR_NO_DEVICE;
  };
  if (!api_.load(cfg_.library, &why)) return none(why);
  int n = 0;
  ibv_device** list = api_.get_device_list(&n);
  if (list == nullptr || n == 0) {
    if (list != nullptr) api_.free_device_list(list);
    const int e = errno;
    return none(std::string("no RDMA device here (") +
                (list == nullptr ? std::string("ibv_get_device_list: ") + std::strerror(e) + "; "
                                 : std::string()) +
                "no HCA driver loaded; for Soft-RoCE: modprobe rdma_rxe && rdma link add rxe0 "
                "type rxe netdev eth0)");
  }
  std::vector<PortId> ids;
  std::vector<PortInfo> ports;
  for (int i = 0; i < n; ++i) {
    std::string hca = api_.get_device_name(list[i]);
    ibv_context* c = api_.open_device(list[i]);
    if (c == nullptr) {
      IB_WARN(log_, "%s: cannot open: %s", hca.c_str(), std::strerror(errno));
      continue;
    }
    ibv_device_attr da{};
    if (api_.query_device(c, &da) != 0) {
      IB_WARN(log_, "%s: ibv_query_device failed", hca.c_str());
      api_.close_device(c);
      continue;
    }
    char real[PATH_MAX];
    std::string pci;
    if (realpath(("/sys/class/infiniband/" + hca + "/device").c_str(), real) != nullptr) pci = real;
    for (int p = 1; p <= da.phys_port_cnt; ++p) {
      PortInfo pi;
      pi.hca = hca;
      pi.port = p;
      pi.name = hca + ":" + std::to_string(p);
      pi.pci_path = pci;
      pi.guid = be64toh(api_.get_device_guid(list[i]));
      pi.dev_attr = da;
      if (api_.query_port(c, static_cast<uint8_t>(p), &pi.attr) != 0) {
        IB_WARN(log_, "%s: ibv_query_port failed", pi.name.c_str());
        continue;
      }
      if (pi.attr.state == IBV_PORT_ACTIVE && (pi.attr.link_layer == IBV_LINK_LAYER_ETHERNET ||
                                               pi.attr.link_layer == IBV_LINK_LAYER_INFINIBAND ||
                                               pi.attr.link_layer == IBV_LINK_LAYER_UNSPECIFIED)) {
        std::vector<GidEntry> t = gid_table(api_, c, hca, p, pi.attr.gid_tbl_len);
        bool eth = pi.attr.link_layer == IBV_LINK_LAYER_ETHERNET;
        std::string gwhy;
        pi.gid_index = choose_gid(t, eth, cfg_.gid_index, &gwhy);
        std::string netdev;
        for (const GidEntry& e : t)
          if (e.index == pi.gid_index) {
            std::memcpy(pi.gid.raw, e.raw, 16);
            pi.gid_type = e.type;
            netdev = e.netdev;
          }
        if (pi.gid_index < 0) pi.name += " (" + gwhy + ")";
        pi.gids = std::move(t);
        // HMC_IB_FABRIC says every port reaches every other: no network to tell them apart.
        if (cfg_.fabric.empty())
          pi.net_bits = network_bits(eth, pi.gid_type, pi.gid.raw, ipv4_prefix(netdev, pi.gid.raw));
        pi.fabric =
            fabric_of(eth, pi.gid_type, pi.gid.raw, pi.gid_index >= 0, pi.net_bits, cfg_.fabric);
      }
      ids.push_back({hca, p});
      ports.push_back(pi);
    }
    api_.close_device(c);
  }
  api_.free_device_list(list);

  std::vector<std::string> unmatched;
  std::vector<size_t> chosen = select_ports(cfg_.hca, ids, &unmatched);
  std::string here;
  for (const PortId& p : ids)
    here += (here.empty() ? "" : ", ") + p.hca + ":" + std::to_string(p.port);
  for (const std::string& u : unmatched)
    IB_WARN(log_, "HMC_IB_HCA: no port matches '%s' (ports here: %s)", u.c_str(), here.c_str());
  std::string skipped;
  for (size_t i : chosen) {
    PortInfo& pi = ports[i];
    std::string reason;
    if (pi.attr.state != IBV_PORT_ACTIVE)
      reason = std::string("port ") + port_state_name(pi.attr.state);
    else if (pi.gid_index < 0)
      reason = pi.name.substr(pi.name.find(" (") + 2, pi.name.size() - pi.name.find(" (") - 3);
    if (reason.empty()) {
      auto d = std::make_unique<Device>(*this, pi);
      if (d->open()) {
        devices_.push_back(std::move(d));
        continue;
      }
      reason = "its resources could not be allocated";
    }
    std::string name = ids[i].hca + ":" + std::to_string(ids[i].port);
    IB_INFO(log_, "%s left out: %s", name.c_str(), reason.c_str());
    skipped += (skipped.empty() ? "" : "; ") + name + ": " + reason;
  }
  if (devices_.empty()) {
    if (chosen.empty())
      return none("HMC_IB_HCA=\"" + cfg_hca_text() + "\" selects none of the ports here (" + here +
                  ")");
    return none("no usable port (" + skipped + ")");
  }
  return HMC_PLUGIN_SUCCESS;
}

Context::~Context() {
  while (!endpoints_.empty()) delete *endpoints_.begin();  // leaves the registry itself
  while (!listeners_.empty()) delete *listeners_.begin();
  for (RemoteKey* k : rkeys_) delete k;
  for (MemRegion* m : regions_) destroy_region(*this, m);
  cache_.reset();
  devices_.clear();
  if (epfd_ >= 0) ::close(epfd_);
}

std::vector<Device*> Context::rails_of(const Device& d) {
  std::vector<Device*> out;
  for (auto& o : devices_) {
    if (static_cast<int>(out.size()) + 1 >= cfg_.rails) break;
    // Any network: the peer pairs each with a port of its own on the same one (on_rails).
    if (o.get() == &d || o->info().fabric.empty() ||
        o->info().attr.link_layer != d.info().attr.link_layer ||
        o->info().gid_type != d.info().gid_type)
      continue;
    out.push_back(o.get());
  }
  return out;
}

uint64_t Context::random64() {
  // splitmix64
  uint64_t z = (rng_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void Context::watch(int fd) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev);
}

void Context::unwatch(int fd) {
  epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
}

bool Context::progress(bool full) {
  cache_->poll();
  bool any = false;
  for (auto& d : devices_) any |= d->poll();
  // The wait set costs a system call, which the core's polling loop would pay on every turn (and
  // under emulation that is most of a small message's latency). What it reports that the
  // completion queues do not is rare once connections are up: a side-channel frame (peer gone,
  // rails, queue pair replacement) or a completion event, which only an armed queue raises. So it
  // is read on every call while a connection is being set up or a listener waits, before a
  // sleep (full), and otherwise every kWaitSetIntervalNs.
  const uint64_t now = now_ns();
  // (An endpoint made since the last walk is being set up.)
  const bool due = full || setting_up_ || !listeners_.empty() ||
                   endpoints_.size() != walk_.size() || now - wait_set_ns_ >= kWaitSetIntervalNs;
  if (due) {
    wait_set_ns_ = now;
    epoll_event ev[64];
    int n = epoll_wait(epfd_, ev, 64, 0);
    if (n > 0) {
      any = true;
      std::set<int> ready;
      for (int i = 0; i < n; ++i) ready.insert(ev[i].data.fd);
      // A completion event only drains the channel: the queue is armed again by arm(), before
      // the core sleeps, not while it polls (an armed queue makes the kernel signal every
      // completion).
      for (auto& d : devices_)
        if (ready.count(d->channel_fd()) != 0) {
          d->drain_channel();
          d->poll();
        }
      for (Listener* l : std::set<Listener*>(listeners_))
        if (listeners_.count(l) != 0 && ready.count(l->fd()) != 0) l->on_readable();
      for (Endpoint* e : std::set<Endpoint*>(endpoints_))
        if (endpoints_.count(e) != 0 && e->side_fd() >= 0 && ready.count(e->side_fd()) != 0)
          e->on_side_readable();
    }
  }
  // What moves an endpoint on is a completion (a slot, credits or a piece coming back), a
  // side-channel frame, or its timers (stall, keepalive): with none of these, a call that is due
  // for neither leaves the endpoints alone. (Posts move their own endpoint on.)
  if (!any && !due) return false;
  // Endpoints may end (and leave the registry) while they progress: walk a copy, kept between
  // calls so that the polling loop allocates nothing.
  walk_.assign(endpoints_.begin(), endpoints_.end());
  bool setting_up = false;
  for (Endpoint* e : walk_) {
    if (endpoints_.count(e) == 0) continue;
    e->progress();
    if (endpoints_.count(e) != 0)
      setting_up |= e->stage() != Endpoint::Stage::kReady && e->stage() != Endpoint::Stage::kLost;
  }
  setting_up_ = setting_up;
  return any;
}

hmc_plugin_status_t Context::wait_fd(int* fd) const {
  *fd = epfd_;
  return HMC_PLUGIN_SUCCESS;
}

hmc_plugin_status_t Context::arm() {
  // What this progress handles (a request it completed) must be reported before any sleep.
  if (progress(true)) return HMC_PLUGIN_IN_PROGRESS;
  for (Endpoint* e : endpoints_)
    if (e->has_work()) return HMC_PLUGIN_IN_PROGRESS;
  for (auto& d : devices_)
    if (d->arm() != HMC_PLUGIN_SUCCESS) return HMC_PLUGIN_IN_PROGRESS;
  return HMC_PLUGIN_SUCCESS;
}

}  // namespace hmc::ibverbs
