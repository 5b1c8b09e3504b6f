#include "config.h"

#include <strings.h>

#include <cerrno>
#include <cstdlib>

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

bool parse_bool(const char* text, bool* out) {
  static const char* const kTrue[] = {"1", "true", "yes", "on"};
  static const char* const kFalse[] = {"0", "false", "no", "off"};
  for (const char* t : kTrue)
    if (::strcasecmp(text, t) == 0) return *out = true, true;
  for (const char* f : kFalse)
    if (::strcasecmp(text, f) == 0) return *out = false, true;
  return false;
}

// Splits "a, b,c" into trimmed names; an empty element ("a,,b", "a,") makes it invalid.
bool parse_list(const std::string& all, std::vector<std::string>* out) {
  out->clear();
  size_t pos = 0;
  for (;;) {
    size_t comma = all.find(',', pos);
    std::string item =
        all.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t b = item.find_first_not_of(" \t");
    if (b == std::string::npos) return false;
    size_t e = item.find_last_not_of(" \t");
    out->push_back(item.substr(b, e - b + 1));
    if (comma == std::string::npos) return true;
    pos = comma + 1;
  }
}

// A byte count with an optional K, M or G suffix (powers of 1024), at most max.
bool parse_size(const char* v, size_t max, size_t* out) {
  errno = 0;
  char* end = nullptr;
  unsigned long long n = std::strtoull(v, &end, 10);
  unsigned shift = 0;
  if (end != v && (*end == 'k' || *end == 'K'))
    shift = 10, ++end;
  else if (end != v && (*end == 'm' || *end == 'M'))
    shift = 20, ++end;
  else if (end != v && (*end == 'g' || *end == 'G'))
    shift = 30, ++end;
  if (errno != 0 || end == v || *end != '\0' || *v == '-' || n > (max >> shift)) return false;
  *out = static_cast<size_t>(n << shift);
  return true;
}

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
  auto get = [&](const char* name) -> const char* {
    const char* v = host->config_get(host->host_ctx, name);
    return (v != nullptr && *v != '\0') ? v : nullptr;
  };
  auto bad = [&](const char* name, const char* value, const char* want) {
    log.write(HMC_LOG_ERROR, "invalid %s=\"%s\": expected %s", name, value, want);
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  };

  if (const char* v = get("HMC_OFI_PROVIDER")) {
    if (!parse_list(v, &c.providers) || c.providers.size() > 8)
      return bad("HMC_OFI_PROVIDER", v, "a comma-separated list of up to 8 provider names");
    for (const std::string& p : c.providers)
      if (!valid_name(p)) return bad("HMC_OFI_PROVIDER", v, "provider names (\"tcp\", \"shm\")");
  }
  if (const char* v = get("HMC_OFI_DOMAIN")) {
    if (!valid_name(v)) return bad("HMC_OFI_DOMAIN", v, "a domain name (\"lo\", \"mlx5_0\")");
    c.domain = v;
  }
  if (const char* v = get("HMC_OFI_HMEM")) {
    bool b = false;
    if (::strcasecmp(v, "auto") == 0)
      c.hmem = HmemMode::kAuto;
    else if (parse_bool(v, &b))
      c.hmem = b ? HmemMode::kOn : HmemMode::kOff;
    else
      return bad("HMC_OFI_HMEM", v, "auto, 1 or 0");
  }
  if (const char* v = get("HMC_OFI_PUT_COMPLETION")) {
    if (::strcasecmp(v, "auto") == 0)
      c.put_completion = PutCompletion::kAuto;
    else if (::strcasecmp(v, "delivery") == 0)
      c.put_completion = PutCompletion::kDelivery;
    else if (::strcasecmp(v, "read") == 0)
      c.put_completion = PutCompletion::kRead;
    else
      return bad("HMC_OFI_PUT_COMPLETION", v, "auto, delivery or read");
  }
  if (const char* v = get("HMC_OFI_MR_CACHE")) {
    errno = 0;
    char* end = nullptr;
    long long n = std::strtoll(v, &end, 10);
    if (errno != 0 || *end != '\0' || n < 0 || n > 65536)
      return bad("HMC_OFI_MR_CACHE", v, "an integer from 0 to 65536");
    c.mr_cache = static_cast<size_t>(n);
  }
  if (const char* v = get("HMC_OFI_EAGER_LIMIT")) {
    if (!parse_size(v, kMaxEagerLimit, &c.eager_limit))
      return bad("HMC_OFI_EAGER_LIMIT", v, "a size from 0 to 1M (\"8K\")");
  }
  if (const char* v = get("HMC_OFI_WRITE_CHUNK")) {
    if (::strcasecmp(v, "auto") == 0) {
      c.write_chunk_auto = true;
    } else if (parse_size(v, kMaxWriteChunk, &c.write_chunk) &&
               (c.write_chunk == 0 || c.write_chunk >= kMinWriteChunk)) {
      c.write_chunk_auto = false;
    } else {
      return bad("HMC_OFI_WRITE_CHUNK", v, "auto, 0, or a size from 4K to 1G (\"512K\")");
    }
  }
  if (const char* v = get("HMC_OFI_RNDV")) {
    if (::strcasecmp(v, "auto") == 0)
      c.rndv = RndvMode::kAuto;
    else if (::strcasecmp(v, "read") == 0)
      c.rndv = RndvMode::kRead;
    else if (::strcasecmp(v, "write") == 0)
      c.rndv = RndvMode::kWrite;
    else
      return bad("HMC_OFI_RNDV", v, "auto, read or write");
  }
  if (const char* v = get("HMC_OFI_MR_LOCAL")) {
    if (!parse_bool(v, &c.force_mr_local)) return bad("HMC_OFI_MR_LOCAL", v, "0 or 1");
  }
  if (const char* v = get("HMC_LISTEN_HOST")) c.listen_host = v;

  *out = std::move(c);
  return HMC_PLUGIN_SUCCESS;
}

}  // namespace hmc::ofi
