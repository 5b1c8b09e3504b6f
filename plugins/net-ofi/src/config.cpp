#include "config.h"

#include <strings.h>

#include "hmc/plugin/config.hpp"

namespace hmc::ofi {

const hmc_config_var_t kConfigVars[] = {
    {"HMC_OFI_PROVIDER", "",
     "comma-separated libfabric providers to open, one device each (\"tcp\", \"shm\", \"verbs\", "
     "\"efa\", \"cxi\"); empty: libfabric's first network provider plus shm when present"},
    {"HMC_OFI_DOMAIN", "",
     "libfabric domain to open (\"lo\", \"eth0\", \"mlx5_0\"); empty: for IP providers the "
     "interface holding HMC_LISTEN_HOST, else libfabric's first"},
    {"HMC_OFI_HMEM", "auto",
     "ask for FI_HMEM (device memory): auto (when a CUDA or ROCm runtime is installed), 1, 0"},
    {"HMC_OFI_PUT_COMPLETION", "auto",
     "how a put learns its data is in place: delivery (FI_DELIVERY_COMPLETE), read (an ordered "
     "1-byte read after the write), auto (delivery when the provider accepts it, else read)"},
    {"HMC_OFI_MR_CACHE", "64",
     "registrations of unregistered local buffers kept for reuse when the provider needs local "
     "descriptors (FI_MR_LOCAL); 0 registers per operation"},
    {"HMC_OFI_EAGER_LIMIT", "8K",
     "messages up to this size are copied through the plugin's bounce buffers; larger ones are "
     "read by the receiver straight from the sender's buffer (0 to 1M)"},
    {"HMC_OFI_RNDV", "auto",
     "how larger messages move: write (the receiver answers with its buffer, the sender writes), "
     "read (the receiver reads the sender's buffer), auto (write where the provider orders "
     "sends after writes, FI_ORDER_SAW; else read)"},
    {"HMC_OFI_WRITE_CHUNK", "auto",
     "the largest single fi_write of a write rendezvous, or of a put where writes are applied "
     "in order (4K to 1G, K/M/G suffixes); the pieces go one after another; 0: one write; "
     "auto: 512K on tcp (whose 4 MiB writes ran at about 2/3 the speed of 512K pieces), else 0"},
    {"HMC_OFI_MR_LOCAL", "0",
     "register local buffers and pass descriptors even when the provider does not require it"},
    {"HMC_LISTEN_HOST", "127.0.0.1",
     "(core) control-plane address; IP providers open the domain holding it unless "
     "HMC_OFI_DOMAIN is set (0.0.0.0: libfabric's first)"},
    {nullptr, nullptr, nullptr},
};

namespace {

bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '-' || c == '.' || c == ':'))
      return false;
  return true;
}

}  // namespace

hmc_plugin_status_t load_config(const hmc_host_services_t* host, const Log& log, Config* out) {
  Config c;
  hmc::plugin::ConfigReader r(host, log);
  constexpr hmc_plugin_status_t kBad = HMC_PLUGIN_ERR_CONFIG;  // the reader logged why
  auto bad = [&](const char* name, const std::string& value, const char* want) {
    r.invalid(name, value, want);
    return kBad;
  };
  std::string v;

  if (!r.read_list("HMC_OFI_PROVIDER", 8, &c.providers,
                   "a comma-separated list of up to 8 provider names"))
    return kBad;
  for (const std::string& p : c.providers)
    if (!valid_name(p))
      return bad("HMC_OFI_PROVIDER", r.text("HMC_OFI_PROVIDER"),
                 "provider names (\"tcp\", \"shm\")");
  if (!(v = r.text("HMC_OFI_DOMAIN")).empty()) {
    if (!valid_name(v)) return bad("HMC_OFI_DOMAIN", v, "a domain name (\"lo\", \"mlx5_0\")");
    c.domain = v;
  }
  if (!(v = r.text("HMC_OFI_HMEM")).empty()) {
    bool b = false;
    if (hmc::plugin::parse_bool(v, &b))
      c.hmem = b ? HmemMode::kOn : HmemMode::kOff;
    else if (::strcasecmp(v.c_str(), "auto") == 0)
      c.hmem = HmemMode::kAuto;
    else
      return bad("HMC_OFI_HMEM", v, "auto, 1 or 0");
  }
  int choice = 0;  // index in the list of choices, the first being the default
  static constexpr PutCompletion kPutCompletions[] = {
      PutCompletion::kAuto, PutCompletion::kDelivery, PutCompletion::kRead};
  if (!r.read_choice("HMC_OFI_PUT_COMPLETION", {"auto", "delivery", "read"}, &choice)) return kBad;
  c.put_completion = kPutCompletions[choice];
  if (!r.read_int("HMC_OFI_MR_CACHE", size_t{0}, size_t{65536}, &c.mr_cache)) return kBad;
  if (!r.read_size("HMC_OFI_EAGER_LIMIT", 0, kMaxEagerLimit, &c.eager_limit,
                   "a size from 0 to 1M (\"8K\")"))
    return kBad;
  if (!(v = r.text("HMC_OFI_WRITE_CHUNK")).empty()) {
    size_t n = 0;
    if (::strcasecmp(v.c_str(), "auto") == 0) {
      c.write_chunk_auto = true;
    } else if (hmc::plugin::parse_size(v, &n) && n <= kMaxWriteChunk &&
               (n == 0 || n >= kMinWriteChunk)) {
      c.write_chunk_auto = false;
      c.write_chunk = n;
    } else {
      return bad("HMC_OFI_WRITE_CHUNK", v, "auto, 0, or a size from 4K to 1G (\"512K\")");
    }
  }
  choice = 0;
  static constexpr RndvMode kRndvModes[] = {RndvMode::kAuto, RndvMode::kRead, RndvMode::kWrite};
  if (!r.read_choice("HMC_OFI_RNDV", {"auto", "read", "write"}, &choice)) return kBad;
  c.rndv = kRndvModes[choice];
  if (!r.read_bool("HMC_OFI_MR_LOCAL", &c.force_mr_local)) return kBad;
  if (!(v = r.text("HMC_LISTEN_HOST")).empty()) c.listen_host = v;

  *out = std::move(c);
  return HMC_PLUGIN_SUCCESS;
}

}  // namespace hmc::ofi
