#include "discover.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <rdma/fi_domain.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "hmc/plugin/net.h"

namespace hmc::ofi {

std::string core_provider_name(const char* prov_name) {
  if (prov_name == nullptr) return "";
  std::string s(prov_name);
  size_t semi = s.find(';');
  return semi == std::string::npos ? s : s.substr(0, semi);
}

bool same_host_provider(const std::string& name) {
  return name == "shm" || name == "sm2";
}

namespace {

// Whether a vendor runtime libfabric would drive for FI_HMEM is installed. libfabric loads the
// same libraries itself; a device plugin of the core may not have loaded them yet.
bool library_present(const char* soname) {
  void* h = ::dlopen(soname, RTLD_LAZY | RTLD_LOCAL);
  if (h == nullptr) return false;
  ::dlclose(h);
  return true;
}

struct Runtimes {
  bool cuda = false;
  bool rocm = false;
};

// A runtime counts only with its kernel driver's device node: the libraries alone are often
// installed on machines without the GPU.
Runtimes detect_runtimes() {
  Runtimes r;
  r.cuda = ::access("/dev/nvidiactl", F_OK) == 0 && library_present("libcuda.so.1");
  r.rocm = ::access("/dev/kfd", F_OK) == 0 && library_present("libhsa-runtime64.so.1");
  return r;
}

FiInfoPtr make_hints(uint64_t caps, bool hmem, const std::string& prov) {
  FiInfoPtr h(fi_allocinfo());
  if (!h) return h;
  h->ep_attr->type = FI_EP_RDM;
  h->caps = caps;
  // Every request embeds an fi_context2, so both context modes are honoured.
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  // Every registration mode the plugin handles: local descriptors (through its cache), virtual
  // addresses or offsets, provider keys, binding to the endpoint.
  h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
                            FI_MR_ENDPOINT | (hmem ? FI_MR_HMEM : 0);
  // The core serialises every call into a context.
  h->domain_attr->threading = FI_THREAD_DOMAIN;
  h->domain_attr->av_type = FI_AV_TABLE;
  // Same-tag messages must match in send order (net.h).
  h->tx_attr->msg_order = FI_ORDER_SAS;
  h->rx_attr->msg_order = FI_ORDER_SAS;
  if (!prov.empty()) h->fabric_attr->prov_name = ::strdup(prov.c_str());
  return h;
}

bool ipv4_of(const fi_info* i, in_addr* out) {
  if (i->addr_format != FI_SOCKADDR_IN || i->src_addr == nullptr ||
      i->src_addrlen < sizeof(sockaddr_in))
    return false;
  *out = static_cast<const sockaddr_in*>(i->src_addr)->sin_addr;
  return true;
}

// Picks the domain to open from one provider's fi_getinfo list; nullptr when HMC_OFI_DOMAIN
// names one the provider does not offer.
const fi_info* pick_domain(const fi_info* list, const Config& cfg, const Log& log) {
  if (!cfg.domain.empty()) {
    for (const fi_info* i = list; i != nullptr; i = i->next)
      if (i->domain_attr->name != nullptr && cfg.domain == i->domain_attr->name) return i;
    return nullptr;
  }
  // IP providers: the interface holding the core's listen address, as net-hoststage does, so
  // a default single-host setup stays on loopback and HMC_LISTEN_HOST=<ip> picks the NIC.
  in_addr want{};
  if (cfg.listen_host != "0.0.0.0" && ::inet_pton(AF_INET, cfg.listen_host.c_str(), &want) == 1) {
    for (const fi_info* i = list; i != nullptr; i = i->next) {
      in_addr have{};
      if (ipv4_of(i, &have) && have.s_addr == want.s_addr) return i;
    }
    // A loopback listen address also matches any 127/8 domain.
    if ((ntohl(want.s_addr) >> 24) == 127) {
      for (const fi_info* i = list; i != nullptr; i = i->next) {
        in_addr have{};
        if (ipv4_of(i, &have) && (ntohl(have.s_addr) >> 24) == 127) return i;
      }
    }
    OFI_DEBUG(log, "no %s domain holds HMC_LISTEN_HOST=%s; using libfabric's first (%s)",
              core_provider_name(list->fabric_attr->prov_name).c_str(), cfg.listen_host.c_str(),
              list->domain_attr->name ? list->domain_attr->name : "?");
  }
  return list;
}

std::string domain_names(const fi_info* list) {
  std::string s;
  for (const fi_info* i = list; i != nullptr; i = i->next) {
    std::string d = i->domain_attr->name ? i->domain_attr->name : "?";
    if (s.find(d) != std::string::npos) continue;
    if (!s.empty()) s += ", ";
    s += d;
  }
  return s;
}

// Tags must have all 64 bits: bit 63 tells the plugin's messages from data, and slot keys
// spread over bits 0 to 62 (wire.h). FI_TAG_GENERIC (0xaaaa...) and 0 both mean "all bits".
bool full_tags(const fi_info* i) {
  uint64_t fmt = i->ep_attr->mem_tag_format;
  return fmt == 0 || (fmt >> 60) != 0;
}

struct Attempt {
  bool rma;
  bool hmem;
  bool directed;
};

// Tries to make one device from provider `prov`. On failure returns false with *why.
bool choose(const std::string& prov, const Config& cfg, const Log& log, const Runtimes& rt,
            DeviceChoice* out, std::string* why) {
  const bool want_hmem =
      cfg.hmem == HmemMode::kOn || (cfg.hmem == HmemMode::kAuto && (rt.cuda || rt.rocm));
  std::vector<Attempt> attempts;
  for (bool rma : {true, false})
    for (bool hmem : {true, false})
      for (bool directed : {true, false})
        if (!hmem || want_hmem) attempts.push_back({rma, hmem, directed});

  std::string last_error = "no matching provider";
  bool domain_missing = false;
  std::string domains;
  for (const Attempt& a : attempts) {
    uint64_t caps = FI_TAGGED | (a.rma ? FI_RMA : 0) | (a.hmem ? FI_HMEM : 0) |
                    (a.directed ? FI_DIRECTED_RECV : 0);
    FiInfoPtr hints = make_hints(caps, a.hmem, prov);
    if (!hints) return *why = "fi_allocinfo failed", false;
    fi_info* raw = nullptr;
    int rc = fi_getinfo(kFiVersion, nullptr, nullptr, 0, hints.get(), &raw);
    FiInfoPtr list(raw);
    if (rc != 0 || !list) {
      last_error = std::string("fi_getinfo: ") + fi_err(rc);
      continue;
    }
    const fi_info* pick = pick_domain(list.get(), cfg, log);
    if (pick == nullptr) {
      domain_missing = true;
      domains = domain_names(list.get());
      continue;
    }
    if (!full_tags(pick)) {
      char fmt[32];
      std::snprintf(fmt, sizeof(fmt), "0x%llx",
                    static_cast<unsigned long long>(pick->ep_attr->mem_tag_format));
      last_error = std::string("it matches fewer than 64 tag bits (mem_tag_format ") + fmt + ")";
      continue;
    }
    out->info.reset(fi_dupinfo(pick));
    if (!out->info) return *why = "fi_dupinfo failed", false;
    out->name = core_provider_name(pick->fabric_attr->prov_name);
    out->rma = a.rma;
    out->directed = a.directed;
    out->hmem = a.hmem;
    out->mem_ifaces = HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_HOST);
    if (a.hmem) {
      if (rt.cuda) out->mem_ifaces |= HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_CUDA);
      if (rt.rocm) out->mem_ifaces |= HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_ROCM);
    }
    // Completion semantics are an op flag; a provider that cannot give delivery completion
    // declines a hint that asks for it.
    if (a.rma) {
      FiInfoPtr dc = make_hints(caps, a.hmem, pick->fabric_attr->prov_name);
      dc->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
      fi_info* dc_raw = nullptr;
      out->delivery_complete = fi_getinfo(kFiVersion, nullptr, nullptr, 0, dc.get(), &dc_raw) == 0;
      if (dc_raw != nullptr) fi_freeinfo(dc_raw);
    }
    if (!a.rma)
      OFI_INFO(log, "provider %s offers no FI_RMA: device '%s' serves tagged messages only",
               pick->fabric_attr->prov_name, out->name.c_str());
    if (want_hmem && !a.hmem)
      OFI_INFO(log, "provider %s offers no FI_HMEM: device '%s' reaches host memory only",
               pick->fabric_attr->prov_name, out->name.c_str());
    return true;
  }
  if (domain_missing) {
    *why = "HMC_OFI_DOMAIN=" + cfg.domain + " is not one of its domains (" + domains + ")";
    return false;
  }
  // Tell "no such provider" from "a provider without tagged messages".
  FiInfoPtr hints = make_hints(FI_MSG | FI_RMA, false, prov);
  fi_info* raw = nullptr;
  if (hints && fi_getinfo(kFiVersion, nullptr, nullptr, 0, hints.get(), &raw) == 0 && raw) {
    fi_freeinfo(raw);
    *why = "it offers no tagged messages (FI_TAGGED) on an RDM endpoint";
    return false;
  }
  *why = last_error;
  return false;
}

}  // namespace

std::vector<DeviceChoice> discover(const Config& cfg, const Log& log, std::string* why_none) {
  std::vector<DeviceChoice> out;
  const Runtimes rt = detect_runtimes();
  std::vector<std::string> names = cfg.providers;
  const bool automatic = names.empty();
  if (automatic) {
    // libfabric lists providers best first: take its first network provider, plus a same-host
    // one (shm) as a second device when there is one.
    FiInfoPtr hints = make_hints(FI_TAGGED, false, "");
    fi_info* raw = nullptr;
    int rc = hints ? fi_getinfo(kFiVersion, nullptr, nullptr, 0, hints.get(), &raw) : -FI_ENOMEM;
    FiInfoPtr list(raw);
    if (rc != 0 || !list) {
      *why_none = std::string(
                      "libfabric offers no provider with tagged messages on an RDM "
                      "endpoint (fi_getinfo: ") +
                  fi_err(rc) + ")";
      return out;
    }
    std::string network, local;
    for (const fi_info* i = list.get(); i != nullptr; i = i->next) {
      std::string n = core_provider_name(i->fabric_attr->prov_name);
      if (same_host_provider(n)) {
        if (local.empty()) local = n;
      } else if (network.empty()) {
        network = n;
      }
    }
    if (!network.empty()) names.push_back(network);
    if (!local.empty()) names.push_back(local);
  }
  std::string reasons;
  for (const std::string& n : names) {
    bool dup = false;
    for (const DeviceChoice& d : out) dup |= d.name == n;
    if (dup) {
      OFI_WARN(log, "HMC_OFI_PROVIDER lists %s twice; opened once", n.c_str());
      continue;
    }
    DeviceChoice c;
    std::string why;
    if (choose(n, cfg, log, rt, &c, &why)) {
      out.push_back(std::move(c));
      continue;
    }
    if (!reasons.empty()) reasons += "; ";
    reasons += n + ": " + why;
    // A provider the user asked for by name deserves a warning; automatic probing does not.
    if (automatic)
      OFI_INFO(log, "provider %s not used: %s", n.c_str(), why.c_str());
    else
      OFI_WARN(log, "HMC_OFI_PROVIDER: provider %s not used: %s", n.c_str(), why.c_str());
  }
  if (out.empty()) *why_none = reasons.empty() ? "no provider found" : reasons;
  return out;
}

}  // namespace hmc::ofi
