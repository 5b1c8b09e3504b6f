#include "config.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace hmc::hoststage {

const hmc_config_var_t kConfigVars[] = {
    {"HMC_HOSTSTAGE_STREAMS", "2",
     "TCP connections per endpoint (1-64); large messages are striped over them in chunks"},
    {"HMC_HOSTSTAGE_IFNAMES", "",
     "comma-separated interfaces (\"eth0,eth1\") whose IPv4 addresses tcp listens on and binds "
     "its streams to; empty: HMC_LISTEN_HOST"},
    {"HMC_HOSTSTAGE_SHM", "1", "offer the same-host shm device (0 or 1)"},
    {"HMC_HOSTSTAGE_SHM_CMA", "1",
     "shm moves bulk data with cross-memory attach (0: stream it over the Unix socket instead)"},
    {"HMC_HOSTSTAGE_EAGER_LIMIT", "64K",
     "tcp: messages up to this size are sent eagerly, larger ones by rendezvous (max 1M)"},
    {"HMC_HOSTSTAGE_SHM_EAGER_LIMIT", "16K",
     "shm: messages up to this size travel inline in the shared ring (max SHM_RING/4)"},
    {"HMC_HOSTSTAGE_SHM_RING", "512K",
     "shm: bytes of each direction's shared ring (power of two, 64K-64M)"},
    {"HMC_HOSTSTAGE_CHUNK", "512K",
     "tcp: large messages move in chunks of this size, spread over the streams"},
    {"HMC_HOSTSTAGE_SHM_CHUNK", "4M",
     "shm: bytes per cross-memory-attach copy (and per chunk when streaming over the socket)"},
    {"HMC_HOSTSTAGE_SOCKBUF", "4M",
     "tcp SO_SNDBUF/SO_RCVBUF in bytes; 0 leaves the kernel's autotuning on"},
    {"HMC_LISTEN_HOST", "127.0.0.1",
     "(core) control-plane address; tcp listens there when HMC_HOSTSTAGE_IFNAMES is empty "
     "(0.0.0.0: all addresses, advertising the first non-loopback one)"},
    {nullptr, nullptr, nullptr},
};

bool parse_size(const char* text, size_t* out) {
  if (text == nullptr || *text == '\0' || *text == '-' || *text == '+') return false;
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || end == text) return false;
  unsigned shift = 0;
  switch (*end) {
    case '\0': break;
    case 'k':
    case 'K':
      shift = 10;
      ++end;
      break;
    case 'm':
    case 'M':
      shift = 20;
      ++end;
      break;
    case 'g':
    case 'G':
      shift = 30;
      ++end;
      break;
    default: return false;
  }
  if (*end != '\0') return false;
  if (shift != 0 && v > (~0ull >> shift)) return false;
  unsigned long long r = v << shift;
  if (r > static_cast<unsigned long long>(SIZE_MAX)) return false;
  *out = static_cast<size_t>(r);
  return true;
}

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

bool parse_int(const char* text, long lo, long hi, int* out) {
  if (*text == '\0') return false;
  errno = 0;
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

// Splits "a, b,c" into trimmed names; an empty element ("a,,b", "a,") makes it invalid.
bool parse_list(const char* text, std::vector<std::string>* out) {
  out->clear();
  std::string all(text);
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

bool is_pow2(size_t v) {
  return v != 0 && (v & (v - 1)) == 0;
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
  auto size_var = [&](const char* name, size_t lo, size_t hi, size_t* dst,
                      const char* want) -> bool {
    const char* v = get(name);
    if (v == nullptr) return true;
    size_t s = 0;
    if (!parse_size(v, &s) || s < lo || s > hi) {
      bad(name, v, want);
      return false;
    }
    *dst = s;
    return true;
  };

  if (const char* v = get("HMC_HOSTSTAGE_STREAMS")) {
    if (!parse_int(v, 1, kMaxStreams, &c.streams))
      return bad("HMC_HOSTSTAGE_STREAMS", v, "an integer from 1 to 64");
  }
  if (const char* v = get("HMC_HOSTSTAGE_IFNAMES")) {
    if (!parse_list(v, &c.ifnames) || c.ifnames.size() > 16)
      return bad("HMC_HOSTSTAGE_IFNAMES", v, "a comma-separated list of up to 16 interface names");
    for (const std::string& n : c.ifnames)
      if (n.size() >= 16) return bad("HMC_HOSTSTAGE_IFNAMES", v, "interface names under 16 chars");
  }
  if (const char* v = get("HMC_HOSTSTAGE_SHM")) {
    if (!parse_bool(v, &c.shm)) return bad("HMC_HOSTSTAGE_SHM", v, "0 or 1");
  }
  if (const char* v = get("HMC_HOSTSTAGE_SHM_CMA")) {
    if (!parse_bool(v, &c.shm_cma)) return bad("HMC_HOSTSTAGE_SHM_CMA", v, "0 or 1");
  }
  if (!size_var("HMC_HOSTSTAGE_EAGER_LIMIT", 0, kMaxEagerLimit, &c.eager_limit,
                "a size from 0 to 1M (\"64K\")"))
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  if (!size_var("HMC_HOSTSTAGE_SHM_RING", kMinShmRing, kMaxShmRing, &c.shm_ring,
                "a power of two from 64K to 64M"))
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  if (!is_pow2(c.shm_ring))
    return bad("HMC_HOSTSTAGE_SHM_RING", get("HMC_HOSTSTAGE_SHM_RING"),
               "a power of two from 64K to 64M");
  if (!size_var("HMC_HOSTSTAGE_SHM_EAGER_LIMIT", 0, c.shm_ring / 4, &c.shm_eager_limit,
                "a size from 0 to a quarter of HMC_HOSTSTAGE_SHM_RING"))
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  if (c.shm_eager_limit > c.shm_ring / 4) {
    log.write(HMC_LOG_ERROR,
              "invalid HMC_HOSTSTAGE_SHM_EAGER_LIMIT=%zu: must not exceed a quarter of "
              "HMC_HOSTSTAGE_SHM_RING (%zu)",
              c.shm_eager_limit, c.shm_ring);
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  }
  if (!size_var("HMC_HOSTSTAGE_CHUNK", 4 << 10, size_t{1} << 30, &c.chunk, "a size from 4K to 1G"))
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  if (!size_var("HMC_HOSTSTAGE_SHM_CHUNK", 4 << 10, size_t{1} << 30, &c.shm_chunk,
                "a size from 4K to 1G"))
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  if (!size_var("HMC_HOSTSTAGE_SOCKBUF", 0, size_t{1} << 30, &c.sockbuf,
                "a size from 0 (kernel autotuning) to 1G"))
    return HMC_PLUGIN_ERR_INVALID_ARGUMENT;
  if (const char* v = get("HMC_LISTEN_HOST")) c.listen_host = v;

  *out = std::move(c);
  return HMC_PLUGIN_SUCCESS;
}

}  // namespace hmc::hoststage
