#include "coll/bootstrap.h"

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <sstream>

#include "coll/redis_rendezvous.h"
#include "coll/store.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/random.h"
#include "util/status.h"

namespace hmc::coll {

namespace {

constexpr int kStoreOpMs = 5000;               // one request to the store and its answer
constexpr useconds_t kFailedGraceUs = 300000;  // the host keeps a failed join's verdict readable

// The first of the launchers' variables that is set: (value, name).
bool launcher_value(std::initializer_list<const char*> names, int64_t* value, std::string* from) {
  for (const char* n : names) {
    const char* v = getenv(n);
    if (!v || !*v) continue;
    if (!parse_int(v, value)) continue;
    *from = n;
    return true;
  }
  return false;
}

std::string hex(const std::vector<uint8_t>& b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (uint8_t c : b) {
    s += d[c >> 4];
    s += d[c & 15];
  }
  return s;
}

bool unhex(const std::string& s, std::vector<uint8_t>* out) {
  if (s.size() % 2) return false;
  auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  out->clear();
  for (size_t i = 0; i < s.size(); i += 2) {
    int hi = nib(s[i]), lo = nib(s[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(uint8_t(hi << 4 | lo));
  }
  return true;
}

// "tcp://host:port" -> host, port.
hmc_status_t parse_rendezvous(const std::string& url, std::string* host, uint16_t* port) {
  auto scheme_end = url.find("://");
  std::string scheme = scheme_end == std::string::npos ? "" : url.substr(0, scheme_end);
  if (scheme != "tcp")
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "hmc_comm_create: rendezvous '{}' is neither "
                "tcp://host:port nor redis://host:port/prefix",
                redact_rendezvous(url));
  std::string rest = url.substr(scheme_end + 3);
  auto colon = rest.rfind(':');
  int64_t p = 0;
  if (colon == std::string::npos || colon == 0 || !parse_int(rest.substr(colon + 1), &p) ||
      p <= 0 || p > 65535)
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "hmc_comm_create: rendezvous '{}' is not "
                "tcp://host:port (a port from 1 to 65535)",
                url);
  *host = rest.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']')
    *host = host->substr(1, host->size() - 2);
  *port = uint16_t(p);
  return HMC_SUCCESS;
}

}  // namespace

// One field a line.
std::string encode_member(const Member& m, int size, uint64_t comm_id) {
  return fmt::format("{}\n{:016x}\n{}\n{}\n{}\n{}\n{:016x}", size, m.context_id, m.pid, m.host_id,
                     m.vendor, hex(m.address), comm_id);
}

bool decode_member(const std::string& s, Member* m, int* size, uint64_t* comm_id) {
  std::istringstream in(s);
  std::string f[7];
  for (auto& x : f)
    if (!std::getline(in, x)) return false;
  int64_t v;
  if (!parse_int(f[0], &v)) return false;
  *size = int(v);
  m->context_id = strtoull(f[1].c_str(), nullptr, 16);
  m->pid = atoi(f[2].c_str());
  m->host_id = f[3];
  m->vendor = f[4];
  *comm_id = strtoull(f[6].c_str(), nullptr, 16);
  return unhex(f[5], &m->address);
}

std::string redact_rendezvous(const std::string& url) {
  auto start = url.find("://");
  if (start == std::string::npos) return url;
  start += 3;
  auto at = url.rfind('@', url.find('/', start));
  if (at == std::string::npos || at < start) return url;
  return url.substr(0, start) + "***" + url.substr(at);
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i == 8) return s + fmt::format(" and {} more", ranks.size() - i);
    s += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  return s;
}

hmc_status_t resolve_join(const Config& config, const hmc_comm_options_t* opts,
                          int default_timeout_ms, JoinSettings* out) {
  JoinSettings j;
  j.timeout_ms = default_timeout_ms;
  if (opts && opts->struct_size < sizeof(hmc_comm_options_t))
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "hmc_comm_create: opts->struct_size is {}, expected at least {}", opts->struct_size,
                sizeof(hmc_comm_options_t));
  if (opts && opts->rank >= 0) {
    j.rank = opts->rank;
    j.rank_from = "the options";
  }
  if (opts && opts->size > 0) {
    j.size = opts->size;
    j.size_from = "the options";
  }
  if (opts && opts->rendezvous) j.rendezvous = opts->rendezvous;
  if (opts && opts->timeout_ms != -1) {
    if (opts->timeout_ms < 0)
      return fail(HMC_ERR_INVALID_ARGUMENT,
                  "hmc_comm_create: timeout {} ms is invalid (-1 for "
                  "HMC_TIMEOUT_MS, or a positive number)",
                  opts->timeout_ms);
    j.timeout_ms = opts->timeout_ms;
  }
  int64_t v;
  if (j.rank_from.empty()) {
    if (config.raw("HMC_RANK") && config.get_int("HMC_RANK") >= 0) {
      j.rank = int(config.get_int("HMC_RANK"));
      j.rank_from = "HMC_RANK";
    } else if (launcher_value({"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"}, &v, &j.rank_from)) {
      j.rank = int(v);
    }
  }
  if (j.size_from.empty()) {
    if (config.raw("HMC_WORLD_SIZE") && config.get_int("HMC_WORLD_SIZE") > 0) {
      j.size = int(config.get_int("HMC_WORLD_SIZE"));
      j.size_from = "HMC_WORLD_SIZE";
    } else if (launcher_value({"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"}, &v,
                              &j.size_from)) {
      j.size = int(v);
    }
  }
  if (j.rendezvous.empty()) j.rendezvous = config.get("HMC_RENDEZVOUS");
  if (j.rendezvous.empty()) {
    const char* addr = getenv("MASTER_ADDR");
    const char* port = getenv("MASTER_PORT");
    if (addr && *addr && port && *port) j.rendezvous = fmt::format("tcp://{}:{}", addr, port);
  }
  if (j.size_from.empty() || j.size <= 0)
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "hmc_comm_create: no size: give it in the options, "
                "HMC_WORLD_SIZE, or run under a launcher (WORLD_SIZE, SLURM_NTASKS, "
                "OMPI_COMM_WORLD_SIZE)");
  if (j.rank_from.empty())
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "hmc_comm_create: no rank: give it in the options, "
                "HMC_RANK, or run under a launcher (RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK)");
  if (j.rank < 0 || j.rank >= j.size)
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "hmc_comm_create: rank {} (from {}) is outside 0..{} "
                "(size {} from {})",
                j.rank, j.rank_from, j.size - 1, j.size, j.size_from);
  if (j.rendezvous.empty())
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "hmc_comm_create: no rendezvous: give it in the options, "
                "HMC_RENDEZVOUS=tcp://host:port (or redis://host:port/prefix), or MASTER_ADDR and "
                "MASTER_PORT");
  *out = j;
  return HMC_SUCCESS;
}

hmc_status_t rendezvous(const JoinSettings& join, const Member& self, std::vector<Member>* members,
                        uint64_t* comm_id) {
  if (join.rendezvous.rfind("redis://", 0) == 0)
    return redis_rendezvous(join, self, members, comm_id);
  std::string host;
  uint16_t port = 0;
  hmc_status_t st = parse_rendezvous(join.rendezvous, &host, &port);
  if (st != HMC_SUCCESS) return st;
  uint64_t deadline = deadline_after_ms(join.timeout_ms);
  std::unique_ptr<StoreServer> server;
  uint64_t my_comm_id = 0;
  if (join.rank == 0) {
    server = std::make_unique<StoreServer>();
    if ((st = server->start(host, port)) != HMC_SUCCESS) return st;
    if ((st = random_bytes(&my_comm_id, sizeof my_comm_id)) != HMC_SUCCESS) return st;
  }
  StoreClient store;
  if ((st = store.connect(host, port, deadline)) != HMC_SUCCESS) return st;
  // Each exchange with the store has its own bound: the join's deadline is for the ranks.
  auto op_deadline = [&] { return std::max(deadline, deadline_after_ms(kStoreOpMs)); };

  std::string me =
      fmt::format("context {:016x} (pid {} on {})", self.context_id, self.pid, self.host_id);
  std::string holder;
  if ((st = store.claim(fmt::format("rank/{}", join.rank), me, &holder, op_deadline())) !=
      HMC_SUCCESS)
    return st;
  if (holder != me)
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "hmc_comm_create: rank {} (from {}) is claimed twice: "
                "by {} and by this {}",
                join.rank, join.rank_from, holder, me);
  if ((st = store.set(fmt::format("info/{}", join.rank), encode_member(self, join.size, my_comm_id),
                      op_deadline())) != HMC_SUCCESS)
    return st;

  std::vector<Member> got(size_t(join.size));
  std::vector<bool> have(size_t(join.size), false);
  int missing = join.size;
  auto absent = [&] {
    std::vector<int> ranks;
    for (int r = 0; r < join.size; ++r)
      if (!have[size_t(r)]) ranks.push_back(r);
    return fmt::format("rank{} {} of {}", ranks.size() > 1 ? "s" : "", rank_list(ranks), join.size);
  };
  // The host's verdict on a failed join (a rank missing, a size that disagrees) stays in the store
  // a moment, so that every rank ends with it rather than with the store gone.
  auto host_gives_up = [&](hmc_status_t status) {
    if (join.rank != 0) return status;
    std::string text = last_error();
    if (store.set("failed", fmt::format("{}\n{}", int(status), text), op_deadline()) == HMC_SUCCESS)
      usleep(kFailedGraceUs);
    return set_error(status, text);
  };
  // A store that went away while ranks were missing: say which, with why.
  auto store_gone = [&] {
    return fail(st, "hmc_comm_create: {} had not joined when the store failed: {}", absent(),
                last_error());
  };
  while (missing > 0) {
    std::string value;
    bool found = false;
    // The host gave up (its deadline came first): the same verdict here.
    if (join.rank != 0) {
      if ((st = store.get("failed", &value, &found, op_deadline())) != HMC_SUCCESS)
        return store_gone();
      if (found) {
        auto nl = value.find('\n');
        int64_t code = HMC_ERR_TIMEOUT;
        if (nl == std::string::npos || !parse_int(value.substr(0, nl), &code))
          nl = std::string::npos;
        return fail(hmc_status_t(code), "{} (said rank 0)",
                    nl == std::string::npos ? value : value.substr(nl + 1));
      }
    }
    for (int r = 0; r < join.size; ++r) {
      if (have[size_t(r)]) continue;
      if ((st = store.get(fmt::format("info/{}", r), &value, &found, op_deadline())) != HMC_SUCCESS)
        return store_gone();
      if (!found) continue;
      int size = 0;
      uint64_t cid = 0;
      if (!decode_member(value, &got[size_t(r)], &size, &cid))
        return host_gives_up(fail(HMC_ERR_PROTOCOL,
                                  "hmc_comm_create: rank {}'s entry in the rendezvous store "
                                  "is malformed",
                                  r));
      if (size != join.size)
        return host_gives_up(fail(HMC_ERR_PROTOCOL,
                                  "hmc_comm_create: the size disagrees: rank {} says {}, this "
                                  "rank {} says {} (from {})",
                                  r, size, join.rank, join.size, join.size_from));
      if (r == 0) *comm_id = cid;
      have[size_t(r)] = true;
      --missing;
    }
    if (missing == 0) break;
    if (now_ns() >= deadline) {
      std::string text = fmt::format(
          "hmc_comm_create: {} did not join within {} ms (rendezvous "
          "{})",
          absent(), join.timeout_ms, join.rendezvous);
      return host_gives_up(fail(HMC_ERR_TIMEOUT, "{}", text));
    }
    usleep(5000);
  }
  if ((st = store.set(fmt::format("got/{}", join.rank), "1", op_deadline())) != HMC_SUCCESS)
    return st;
  // The host keeps the store until every rank has read what it needs.
  if (join.rank == 0) {
    deadline = deadline_after_ms(join.timeout_ms);
    for (int r = 1; r < join.size; ++r) {
      for (;;) {
        bool found = false;
        std::string value;
        if ((st = store.get(fmt::format("got/{}", r), &value, &found, op_deadline())) !=
            HMC_SUCCESS)
          return st;
        if (found) break;
        if (now_ns() >= deadline) {
          HMC_LOG_W(
              "hmc_comm_create: rank {} joined but did not confirm it read the others' "
              "entries; the rendezvous store closes now",
              r);
          break;
        }
        usleep(2000);
      }
    }
  }
  *members = std::move(got);
  return HMC_SUCCESS;
}

GroupShape shape_of(const std::vector<Member>& members) {
  GroupShape g;
  g.size = int(members.size());
  std::vector<std::string> hosts;
  for (const auto& m : members) {
    int h = -1;
    for (size_t i = 0; i < hosts.size(); ++i)
      if (hosts[i] == m.host_id) h = int(i);
    if (h < 0) {
      h = int(hosts.size());
      hosts.push_back(m.host_id);
    }
    g.host_of_rank.push_back(h);
    g.vendor_of_rank.push_back(m.vendor);
  }
  return g;
}

}  // namespace hmc::coll
