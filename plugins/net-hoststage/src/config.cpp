#include "config.h"

#include "hmc/plugin/config.hpp"

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
     "shm: messages up to this size travel inline in the shared ring, larger ones by one "
     "cross-memory copy (max SHM_RING/4)"},
    {"HMC_HOSTSTAGE_SHM_RING", "512K",
     "shm: bytes of each direction's shared ring (power of two, 64K-64M)"},
    {"HMC_HOSTSTAGE_CHUNK", "512K",
     "tcp: large messages move in chunks of this size, spread over the streams"},
    {"HMC_HOSTSTAGE_SHM_CHUNK", "4M",
     "shm: bytes per cross-memory-attach copy (and per chunk when streaming over the socket)"},
    {"HMC_HOSTSTAGE_SOCKBUF", "4M",
     "tcp SO_SNDBUF/SO_RCVBUF in bytes; 0 leaves the kernel's autotuning on"},
    {"HMC_HOSTSTAGE_INJECT_ERRORS", "0",
     "for fault tests: one in N posted transfers (send, receive, put, get, vectored) fails at "
     "random with an internal error; 0 never"},
    {"HMC_LISTEN_HOST", "127.0.0.1",
     "(core) control-plane address; tcp listens there when HMC_HOSTSTAGE_IFNAMES is empty "
     "(0.0.0.0: all addresses, advertising the first non-loopback one)"},
    {nullptr, nullptr, nullptr},
};

namespace {

bool is_pow2(size_t v) {
  return v != 0 && (v & (v - 1)) == 0;
}

}  // namespace

hmc_plugin_status_t load_config(const hmc_host_services_t* host, const Log& log, Config* out) {
  Config c;
  hmc::plugin::ConfigReader r(host, log);
  constexpr hmc_plugin_status_t kBad = HMC_PLUGIN_ERR_CONFIG;  // the reader logged why

  if (!r.read_int("HMC_HOSTSTAGE_STREAMS", 1, kMaxStreams, &c.streams)) return kBad;
  if (!r.read_list("HMC_HOSTSTAGE_IFNAMES", 16, &c.ifnames,
                   "a comma-separated list of up to 16 interface names"))
    return kBad;
  for (const std::string& n : c.ifnames)
    if (n.size() >= 16) {
      r.invalid("HMC_HOSTSTAGE_IFNAMES", r.text("HMC_HOSTSTAGE_IFNAMES"),
                "interface names under 16 chars");
      return kBad;
    }
  if (!r.read_bool("HMC_HOSTSTAGE_SHM", &c.shm)) return kBad;
  if (!r.read_bool("HMC_HOSTSTAGE_SHM_CMA", &c.shm_cma)) return kBad;
  if (!r.read_size("HMC_HOSTSTAGE_EAGER_LIMIT", 0, kMaxEagerLimit, &c.eager_limit,
                   "a size from 0 to 1M (\"64K\")"))
    return kBad;
  if (!r.read_size("HMC_HOSTSTAGE_SHM_RING", kMinShmRing, kMaxShmRing, &c.shm_ring,
                   "a power of two from 64K to 64M"))
    return kBad;
  if (!is_pow2(c.shm_ring)) {
    r.invalid("HMC_HOSTSTAGE_SHM_RING", r.text("HMC_HOSTSTAGE_SHM_RING"),
              "a power of two from 64K to 64M");
    return kBad;
  }
  // At most a quarter of the ring (the default, 16K, fits the smallest ring).
  if (!r.read_size("HMC_HOSTSTAGE_SHM_EAGER_LIMIT", 0, c.shm_ring / 4, &c.shm_eager_limit,
                   "a size from 0 to a quarter of HMC_HOSTSTAGE_SHM_RING"))
    return kBad;
  if (!r.read_size("HMC_HOSTSTAGE_CHUNK", 4 << 10, size_t{1} << 30, &c.chunk)) return kBad;
  if (!r.read_size("HMC_HOSTSTAGE_SHM_CHUNK", 4 << 10, size_t{1} << 30, &c.shm_chunk)) return kBad;
  if (!r.read_size("HMC_HOSTSTAGE_SOCKBUF", 0, size_t{1} << 30, &c.sockbuf,
                   "a size from 0 (kernel autotuning) to 1G"))
    return kBad;
  if (!r.read_int("HMC_HOSTSTAGE_INJECT_ERRORS", 0, 1000000000, &c.inject_errors)) return kBad;
  std::string listen_host = r.text("HMC_LISTEN_HOST");
  if (!listen_host.empty()) c.listen_host = listen_host;

  *out = std::move(c);
  return HMC_PLUGIN_SUCCESS;
}

}  // namespace hmc::hoststage
