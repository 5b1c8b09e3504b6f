#include "coll/topology.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "util/json.h"
#include "util/status.h"

namespace hmc::coll {

const char* intra_path_name(IntraPath p) {
  switch (p) {
    case IntraPath::DeviceIpc: return "device_ipc";
    case IntraPath::SharedMemory: return "shared_memory";
    case IntraPath::Staged: return "staged";
  }
  return "?";
}

namespace {

// Rough figures of current hardware, used where a file or spec says nothing: device IPC as a
// share of NVLink/xGMI, a single-threaded host memcpy for shared memory, two PCIe copies for
// staging, a 400 Gb/s NIC, HBM-bound device copies and reductions, a vectorised host reduction.
constexpr Link kDefaultPaths[kIntraPathCount] = {{2400, 2.5}, {160, 1.0}, {200, 10.0}};
constexpr Link kDefaultNic = {400, 3.0};

// The vendors' collective libraries and fabrics, from public figures (the sources are in
// docs/collectives-simulation.md): per rank and direction, the fabric port and one link; the
// library's call and per-hop latencies from its own tuning model where it publishes one.
CclSpec default_ccl(const std::string& vendor) {
  CclSpec c;
  c.channels = 8;
  if (vendor == "cuda") {  // NVLink 4 through NVSwitch (H100 SXM): 450 GB/s each way, any pair
    c.library = "nccl";
    c.fabric = {3600, 3.4};
    c.pair_gbps = 3600;
    c.call_us = 8.4;
  } else if (vendor == "hip") {  // Infinity Fabric (MI300X): 7 links of 64 GB/s each way
    c.library = "rccl";
    c.fabric = {3584, 3.6};
    c.pair_gbps = 512;
    c.call_us = 17;
  } else if (vendor == "mlu") {  // MLU-Link (MLU370-X8): 200 GB/s both ways together
    c.library = "cncl";
    c.fabric = {800, 3.4};
    c.pair_gbps = 800;
    c.call_us = 10;
  } else if (vendor == "musa") {  // MTLink (MTT S4000): 240 GB/s both ways together
    c.library = "mccl";
    c.fabric = {960, 3.4};
    c.pair_gbps = 960;
    c.call_us = 10;
  } else {
    c.channels = 1;
  }
  return c;
}

VendorSpec default_vendor(const std::string& name) {
  VendorSpec v;
  v.name = name;
  if (name == "host") {
    v.copy_gbps = 160;
    v.reduce_gbps = 160;
  } else {
    v.copy_gbps = 8000;
    v.reduce_gbps = 8000;
    v.op_latency_us = 5;
  }
  v.ccl = default_ccl(name);
  return v;
}

bool parse_intra_path(const std::string& s, IntraPath* out) {
  for (int i = 0; i < kIntraPathCount; ++i)
    if (s == intra_path_name(static_cast<IntraPath>(i))) {
      *out = static_cast<IntraPath>(i);
      return true;
    }
  return false;
}

int vendor_index(const std::vector<VendorSpec>& vendors, const std::string& name) {
  for (size_t i = 0; i < vendors.size(); ++i)
    if (vendors[i].name == name) return static_cast<int>(i);
  return -1;
}

// Fills the per-rank tables from the hosts and checks what spans hosts.
hmc_status_t finish(Topology* t, const std::string& origin) {
  t->host_of_rank.clear();
  t->nic_of_rank.clear();
  for (size_t h = 0; h < t->hosts.size(); ++h) {
    const HostSpec& host = t->hosts[h];
    if (t->hosts.size() > 1 && host.nics.empty())
      return fail(HMC_ERR_INVALID_ARGUMENT, "{}: host {} has no NIC but the cluster has {} hosts",
                  origin, host.name, t->hosts.size());
    for (size_t i = 0; i < host.ranks.size(); ++i) {
      t->host_of_rank.push_back(static_cast<int>(h));
      t->nic_of_rank.push_back(
          host.nics.empty() ? -1 : static_cast<int>(i * host.nics.size() / host.ranks.size()));
    }
  }
  if (t->host_of_rank.empty())
    return fail(HMC_ERR_INVALID_ARGUMENT, "{}: the cluster has no ranks", origin);
  return HMC_SUCCESS;
}

// Reads a parsed topology file; every error names the file, the line and the field.
class FileReader {
 public:
  explicit FileReader(std::string origin) : origin_(std::move(origin)) {}

  hmc_status_t read(const json::Value& root, Topology* t) {
    if (root.type != json::Type::Object) return wrong(root, "(top level)", "an object");
    if (!only(root, "", {"paths", "pairs", "vendors", "hosts", "name", "executor"})) return status_;
    for (int i = 0; i < kIntraPathCount; ++i) t->paths[i] = kDefaultPaths[i];
    t->vendors = {default_vendor("host")};
    if (const json::Value* v = root.find("vendors")) {
      if (v->type != json::Type::Object) return wrong(*v, "vendors", "an object");
      for (const auto& m : v->members) {
        VendorSpec spec = default_vendor(m.first);
        if (!vendor(m.second, "vendors." + m.first, &spec)) return status_;
        int at = vendor_index(t->vendors, m.first);
        if (at >= 0)
          t->vendors[at] = spec;
        else
          t->vendors.push_back(spec);
      }
    }
    if (const json::Value* v = root.find("paths")) {
      if (v->type != json::Type::Object) return wrong(*v, "paths", "an object");
      for (const auto& m : v->members) {
        IntraPath p;
        if (!parse_intra_path(m.first, &p))
          return error(m.second, "paths." + m.first,
                       "unknown path (device_ipc, shared_memory or staged)");
        json::Value linkish = m.second;
        if (p == IntraPath::SharedMemory && m.second.type == json::Type::Object) {
          // Its single-copy members beside the link's.
          linkish.members.clear();
          const std::string f = "paths.shared_memory";
          for (const auto& k : m.second.members) {
            if (k.first == "single_copy_bytes") {
              double b = 0;
              if (!number(k.second, f + ".single_copy_bytes", 0, &b)) return status_;
              t->shm_single_copy.bytes = static_cast<uint64_t>(b);
            } else if (k.first == "single_copy_gbps") {
              if (!number(k.second, f + ".single_copy_gbps", 0, &t->shm_single_copy.link.gbps))
                return status_;
            } else if (k.first == "single_copy_latency_us") {
              if (!number(k.second, f + ".single_copy_latency_us", 0,
                          &t->shm_single_copy.link.latency_us))
                return status_;
            } else {
              linkish.members.push_back(k);
            }
          }
        }
        if (!link(linkish, "paths." + m.first, &t->paths[static_cast<int>(p)], true))
          return status_;
      }
    }
    if (const json::Value* v = root.find("pairs")) {
      if (v->type != json::Type::Array) return wrong(*v, "pairs", "an array");
      for (size_t i = 0; i < v->items.size(); ++i)
        if (!pair(v->items[i], fmt::format("pairs[{}]", i), t)) return status_;
    }
    if (const json::Value* v = root.find("executor")) {
      if (v->type != json::Type::Object) return wrong(*v, "executor", "an object");
      if (!only(*v, "executor", {"step_us", "transfer_us"})) return status_;
      const json::Value* m;
      if ((m = v->find("step_us")) && !number(*m, "executor.step_us", 0, &t->executor.step_us))
        return status_;
      if ((m = v->find("transfer_us")) &&
          !number(*m, "executor.transfer_us", 0, &t->executor.transfer_us))
        return status_;
    }
    const json::Value* hosts = root.find("hosts");
    if (!hosts) return error(root, "hosts", "missing (the list of hosts)");
    if (hosts->type != json::Type::Array) return wrong(*hosts, "hosts", "an array");
    for (size_t i = 0; i < hosts->items.size(); ++i)
      if (!host(hosts->items[i], fmt::format("hosts[{}]", i), t)) return status_;
    return finish(t, origin_);
  }

 private:
  hmc_status_t error(const json::Value& at, const std::string& field, const std::string& what) {
    status_ = fail(HMC_ERR_INVALID_ARGUMENT, "{}:{}: {}: {}", origin_, at.line, field, what);
    return status_;
  }
  hmc_status_t wrong(const json::Value& at, const std::string& field, const char* wanted) {
    return error(at, field, fmt::format("wants {}, got {}", wanted, json::type_name(at.type)));
  }

  // Rejects members not in `known` (a misspelt key would otherwise be silently ignored).
  bool only(const json::Value& obj, const std::string& field,
            std::initializer_list<const char*> known) {
    for (const auto& m : obj.members) {
      bool ok = false;
      for (const char* k : known) ok = ok || m.first == k;
      if (!ok) {
        std::string list;
        for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
        error(m.second, field.empty() ? m.first : field + "." + m.first,
              "unknown member (known: " + list + ")");
        return false;
      }
    }
    return true;
  }

  bool number(const json::Value& v, const std::string& field, double min, double* out) {
    if (v.type != json::Type::Number) {
      wrong(v, field, "a number");
      return false;
    }
    if (!(v.number >= min) || !std::isfinite(v.number)) {
      error(v, field, fmt::format("wants a number >= {}, got {}", min, v.number));
      return false;
    }
    *out = v.number;
    return true;
  }

  bool boolean(const json::Value& v, const std::string& field, bool* out) {
    if (v.type != json::Type::Bool) {
      wrong(v, field, "true or false");
      return false;
    }
    *out = v.boolean;
    return true;
  }

  bool link(const json::Value& v, const std::string& field, Link* out, bool need_object) {
    if (v.type != json::Type::Object) {
      if (need_object) wrong(v, field, "an object");
      return !need_object;
    }
    if (!only(v, field, {"gbps", "latency_us"})) return false;
    if (const json::Value* g = v.find("gbps"))
      if (!number(*g, field + ".gbps", 0, &out->gbps)) return false;
    if (const json::Value* l = v.find("latency_us"))
      if (!number(*l, field + ".latency_us", 0, &out->latency_us)) return false;
    return true;
  }

  bool vendor(const json::Value& v, const std::string& field, VendorSpec* out) {
    if (v.type != json::Type::Object) {
      wrong(v, field, "an object");
      return false;
    }
    if (!only(v, field, {"ipc", "gpudirect", "copy_gbps", "reduce_gbps", "op_latency_us", "ccl"}))
      return false;
    const json::Value* m;
    if ((m = v.find("ccl")) && !ccl(*m, field + ".ccl", &out->ccl)) return false;
    if ((m = v.find("ipc")) && !boolean(*m, field + ".ipc", &out->ipc)) return false;
    if ((m = v.find("gpudirect")) && !boolean(*m, field + ".gpudirect", &out->gpudirect))
      return false;
    if ((m = v.find("copy_gbps")) && !number(*m, field + ".copy_gbps", 0, &out->copy_gbps))
      return false;
    if ((m = v.find("reduce_gbps")) && !number(*m, field + ".reduce_gbps", 0, &out->reduce_gbps))
      return false;
    if ((m = v.find("op_latency_us")) &&
        !number(*m, field + ".op_latency_us", 0, &out->op_latency_us))
      return false;
    return true;
  }

  bool ccl(const json::Value& v, const std::string& field, CclSpec* out) {
    if (v.type != json::Type::Object) {
      wrong(v, field, "an object");
      return false;
    }
    if (!only(v, field,
              {"library", "fabric_gbps", "pair_gbps", "latency_us", "call_us", "step_us",
               "channels"}))
      return false;
    const json::Value* m;
    if ((m = v.find("library"))) {
      if (m->type != json::Type::String) {
        wrong(*m, field + ".library", "a string (\"\": none)");
        return false;
      }
      out->library = m->string;
    }
    struct {
      const char* key;
      double* to;
    } numbers[] = {{"fabric_gbps", &out->fabric.gbps},
                   {"pair_gbps", &out->pair_gbps},
                   {"latency_us", &out->fabric.latency_us},
                   {"call_us", &out->call_us},
                   {"step_us", &out->step_us}};
    for (const auto& k : numbers)
      if ((m = v.find(k.key)) && !number(*m, field + "." + k.key, 0, k.to)) return false;
    if ((m = v.find("channels"))) {
      double c = 0;
      if (!number(*m, field + ".channels", 1, &c)) return false;
      if (c != std::floor(c) || c > 64) {
        error(*m, field + ".channels", "wants a whole number of channels, 1 to 64");
        return false;
      }
      out->channels = static_cast<int>(c);
    }
    return true;
  }

  bool pair(const json::Value& v, const std::string& field, Topology* t) {
    if (v.type != json::Type::Object) {
      wrong(v, field, "an object");
      return false;
    }
    if (!only(v, field, {"vendors", "path", "gbps", "latency_us"})) return false;
    PairPath p;
    const json::Value* names = v.find("vendors");
    if (!names || names->type != json::Type::Array || names->items.size() != 2) {
      error(names ? *names : v, field + ".vendors", "wants two vendor names, [\"cuda\", \"hip\"]");
      return false;
    }
    int* ends[2] = {&p.vendor_a, &p.vendor_b};
    for (int i = 0; i < 2; ++i) {
      const json::Value& n = names->items[i];
      if (n.type != json::Type::String || (*ends[i] = vendor_index(t->vendors, n.string)) < 0) {
        error(n, fmt::format("{}.vendors[{}]", field, i),
              "wants the name of a vendor of \"vendors\" (or \"host\")");
        return false;
      }
    }
    const json::Value* path = v.find("path");
    if (!path || path->type != json::Type::String || !parse_intra_path(path->string, &p.path)) {
      error(path ? *path : v, field + ".path",
            "wants \"device_ipc\", \"shared_memory\" or \"staged\"");
      return false;
    }
    p.link = t->paths[static_cast<int>(p.path)];
    json::Value linkish = v;
    linkish.members.clear();
    for (const auto& m : v.members)
      if (m.first == "gbps" || m.first == "latency_us") linkish.members.push_back(m);
    if (!link(linkish, field, &p.link, true)) return false;
    t->pairs.push_back(p);
    return true;
  }

  bool host(const json::Value& v, const std::string& field, Topology* t) {
    if (v.type != json::Type::Object) {
      wrong(v, field, "an object");
      return false;
    }
    if (!only(v, field, {"name", "repeat", "ranks", "nics", "memory_gbps", "cores", "cpu_gbps"}))
      return false;
    HostSpec h;
    const json::Value* n = v.find("name");
    if (n) {
      if (n->type != json::Type::String) {
        wrong(*n, field + ".name", "a string");
        return false;
      }
      h.name = n->string;
    }
    double repeat = 1;
    if (const json::Value* r = v.find("repeat")) {
      if (!number(*r, field + ".repeat", 1, &repeat)) return false;
      if (repeat != std::floor(repeat) || repeat > 1e6) {
        error(*r, field + ".repeat", "wants a whole number of hosts");
        return false;
      }
    }
    const json::Value* ranks = v.find("ranks");
    if (!ranks || ranks->type != json::Type::Array || ranks->items.empty()) {
      error(ranks ? *ranks : v, field + ".ranks",
            "wants the vendor of each rank, [\"cuda\", \"cuda\", \"hip\"]");
      return false;
    }
    std::vector<int> vendors;
    for (size_t i = 0; i < ranks->items.size(); ++i) {
      const json::Value& r = ranks->items[i];
      int at = r.type == json::Type::String ? vendor_index(t->vendors, r.string) : -1;
      if (at < 0) {
        error(r, fmt::format("{}.ranks[{}]", field, i),
              r.type == json::Type::String
                  ? "vendor \"" + r.string + "\" is not in \"vendors\" (only \"host\" is built in)"
                  : "wants a vendor name");
        return false;
      }
      vendors.push_back(at);
    }
    if (const json::Value* nics = v.find("nics")) {
      if (nics->type != json::Type::Array) {
        wrong(*nics, field + ".nics", "an array");
        return false;
      }
      for (size_t i = 0; i < nics->items.size(); ++i) {
        Link nic = kDefaultNic;
        if (!link(nics->items[i], fmt::format("{}.nics[{}]", field, i), &nic, true)) return false;
        h.nics.push_back(nic);
      }
    }
    if (const json::Value* m = v.find("memory_gbps"))
      if (!number(*m, field + ".memory_gbps", 0, &h.memory_gbps)) return false;
    if (const json::Value* c = v.find("cores")) {
      double cores = 0;
      if (!number(*c, field + ".cores", 0, &cores)) return false;
      if (cores != std::floor(cores) || cores > 1e6) {
        error(*c, field + ".cores", "wants a whole number of cores");
        return false;
      }
      h.cores = static_cast<int>(cores);
    }
    if (const json::Value* c = v.find("cpu_gbps"))
      if (!number(*c, field + ".cpu_gbps", 0, &h.cpu_gbps)) return false;
    for (int copy = 0; copy < static_cast<int>(repeat); ++copy) {
      HostSpec c = h;
      if (!n)
        c.name = fmt::format("host{}", t->hosts.size());
      else if (repeat > 1)
        c.name = fmt::format("{}{}", h.name, copy);
      for (int vendor : vendors) {
        c.ranks.push_back(static_cast<int>(t->vendor_of_rank.size()));
        t->vendor_of_rank.push_back(vendor);
      }
      t->hosts.push_back(std::move(c));
    }
    return true;
  }

  std::string origin_;
  hmc_status_t status_ = HMC_SUCCESS;
};

bool spec_number(const std::string& key, const std::string& text, double min, double* out,
                 hmc_status_t* st) {
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno != 0 || !(v >= min) || !std::isfinite(v)) {
    *st =
        fail(HMC_ERR_INVALID_ARGUMENT, "cluster spec: {}={}: wants a number >= {}", key, text, min);
    return false;
  }
  *out = v;
  return true;
}

}  // namespace

GroupShape Topology::shape() const {
  GroupShape s;
  s.size = size();
  s.host_of_rank = host_of_rank;
  for (int v : vendor_of_rank) s.vendor_of_rank.push_back(vendors[v].name);
  return s;
}

IntraPath Topology::intra_path(int a, int b, Link* link) const {
  int va = vendor_of_rank[a], vb = vendor_of_rank[b];
  for (const PairPath& p : pairs)
    if ((p.vendor_a == va && p.vendor_b == vb) || (p.vendor_a == vb && p.vendor_b == va)) {
      *link = p.link;
      return p.path;
    }
  IntraPath path = IntraPath::Staged;
  if (vendors[va].name == "host" && vendors[vb].name == "host")
    path = IntraPath::SharedMemory;
  else if (va == vb && vendors[va].ipc)
    path = IntraPath::DeviceIpc;
  *link = paths[static_cast<int>(path)];
  return path;
}

std::string Topology::summary() const {
  std::map<std::string, int> per_vendor;
  for (int v : vendor_of_rank) per_vendor[vendors[v].name]++;
  std::string vendors_text;
  for (const auto& kv : per_vendor)
    vendors_text += fmt::format("{}{} {}", vendors_text.empty() ? "" : ", ", kv.first, kv.second);
  std::string s = fmt::format("{} host{}, {} ranks ({})", hosts.size(),
                              hosts.size() == 1 ? "" : "s", size(), vendors_text);
  if (!hosts.empty() && !hosts[0].nics.empty())
    s += fmt::format(", host0: {} NIC{} of {} Gb/s", hosts[0].nics.size(),
                     hosts[0].nics.size() == 1 ? "" : "s", hosts[0].nics[0].gbps);
  return s;
}

hmc_status_t parse_topology(const std::string& text, const std::string& origin, Topology* out) {
  json::Value root;
  std::string err;
  if (!json::parse(text, &root, &err))
    return fail(HMC_ERR_INVALID_ARGUMENT, "{}: not valid JSON: {}", origin, err);
  Topology t;
  hmc_status_t st = FileReader(origin).read(root, &t);
  if (st != HMC_SUCCESS) return st;
  *out = std::move(t);
  return HMC_SUCCESS;
}

hmc_status_t load_topology(const std::string& path, Topology* out) {
  std::ifstream in(path);
  if (!in) return fail(HMC_ERR_INVALID_ARGUMENT, "{}: cannot open the topology file", path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_topology(text.str(), path, out);
}

hmc_status_t generate_topology(const std::string& spec, Topology* out) {
  double hosts = 1, per_host = 8, nics = 1, memory = 0, cores = 0, cpu = 0;
  // The vendor libraries' figures, for every device vendor that has one; < 0: its default.
  double fabric = -1, fabric_pair = -1, fabric_latency = -1, call = -1, lib_step = -1,
         channels = -1;
  bool libraries = true;
  std::string host_vendor_text;
  Link nic = kDefaultNic;
  Topology t;
  double single_bytes = double(t.shm_single_copy.bytes);
  for (int i = 0; i < kIntraPathCount; ++i) t.paths[i] = kDefaultPaths[i];
  VendorSpec device = default_vendor("device"), host = default_vendor("host");
  std::string vendor_text = "cuda";
  hmc_status_t st = HMC_SUCCESS;
  std::stringstream items(spec);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.empty()) continue;
    auto eq = item.find('=');
    if (eq == std::string::npos)
      return fail(HMC_ERR_INVALID_ARGUMENT, "cluster spec: '{}' is not KEY=VALUE", item);
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    struct NumberKey {
      const char* key;
      double min;
      double* to;
    } keys[] = {
        {"hosts", 1, &hosts},
        {"gpus_per_host", 1, &per_host},
        {"ranks_per_host", 1, &per_host},
        {"nics_per_host", 0, &nics},
        {"nic_gbps", 0, &nic.gbps},
        {"nic_latency_us", 0, &nic.latency_us},
        {"ipc_gbps", 0, &t.paths[0].gbps},
        {"ipc_latency_us", 0, &t.paths[0].latency_us},
        {"shm_gbps", 0, &t.paths[1].gbps},
        {"shm_latency_us", 0, &t.paths[1].latency_us},
        {"staged_gbps", 0, &t.paths[2].gbps},
        {"staged_latency_us", 0, &t.paths[2].latency_us},
        {"memory_gbps", 0, &memory},
        {"copy_gbps", 0, &device.copy_gbps},
        {"reduce_gbps", 0, &device.reduce_gbps},
        {"op_latency_us", 0, &device.op_latency_us},
        {"host_copy_gbps", 0, &host.copy_gbps},
        {"host_reduce_gbps", 0, &host.reduce_gbps},
        {"cores_per_host", 0, &cores},
        {"cpu_gbps", 0, &cpu},
        {"step_us", 0, &t.executor.step_us},
        {"transfer_us", 0, &t.executor.transfer_us},
        {"fabric_gbps", 0, &fabric},
        {"fabric_pair_gbps", 0, &fabric_pair},
        {"fabric_latency_us", 0, &fabric_latency},
        {"ccl_call_us", 0, &call},
        {"ccl_step_us", 0, &lib_step},
        {"ccl_channels", 1, &channels},
        {"shm_single_copy_bytes", 0, &single_bytes},
        {"shm_single_copy_gbps", 0, &t.shm_single_copy.link.gbps},
        {"shm_single_copy_latency_us", 0, &t.shm_single_copy.link.latency_us},
    };
    bool known = false;
    for (const NumberKey& k : keys)
      if (key == k.key) {
        if (!spec_number(key, value, k.min, k.to, &st)) return st;
        known = true;
      }
    if (key == "vendors") {
      vendor_text = value;
      known = true;
    } else if (key == "host_vendors") {
      host_vendor_text = value;
      known = true;
    } else if (key == "gpudirect" || key == "ipc" || key == "ccl") {
      if (value != "0" && value != "1")
        return fail(HMC_ERR_INVALID_ARGUMENT, "cluster spec: {}={}: wants 0 or 1", key, value);
      (key == "ipc"         ? device.ipc
       : key == "gpudirect" ? device.gpudirect
                            : libraries) = value == "1";
      known = true;
    }
    if (!known)
      return fail(HMC_ERR_INVALID_ARGUMENT,
                  "cluster spec: unknown key '{}' (see docs/collectives-simulation.md)", key);
  }
  if (hosts != std::floor(hosts) || per_host != std::floor(per_host) || nics != std::floor(nics) ||
      cores != std::floor(cores) || hosts * per_host > (1 << 20) || cores > 1e6 ||
      (channels >= 0 && (channels != std::floor(channels) || channels > 64)))
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "cluster spec: hosts, gpus_per_host, nics_per_host, cores_per_host and "
                "ccl_channels (at most 64) want whole numbers (at most 2^20 ranks)");
  t.shm_single_copy.bytes = static_cast<uint64_t>(single_bytes);
  if (!host_vendor_text.empty() && vendor_text != "cuda")
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "cluster spec: vendors= (per host) and host_vendors= (per run of hosts) are "
                "exclusive");
  // "cuda:4+hip:4" (a count per vendor, summing to gpus_per_host) or one name for all; with
  // host_vendors, "cuda:32+hip:32": that many hosts of each vendor, in that order.
  t.vendors = {host};
  auto vendor_at = [&](const std::string& name) {
    int at = vendor_index(t.vendors, name);
    if (at >= 0) return at;
    VendorSpec v = name == "host" ? host : device;
    v.name = name;
    v.ccl = default_ccl(name);
    if (!libraries) v.ccl = CclSpec{};
    if (!v.ccl.library.empty()) {
      if (fabric >= 0) v.ccl.fabric.gbps = fabric;
      if (fabric_pair >= 0) v.ccl.pair_gbps = fabric_pair;
      if (fabric_latency >= 0) v.ccl.fabric.latency_us = fabric_latency;
      if (call >= 0) v.ccl.call_us = call;
      if (lib_step >= 0) v.ccl.step_us = lib_step;
      if (channels >= 0) v.ccl.channels = static_cast<int>(channels);
    }
    t.vendors.push_back(v);
    return static_cast<int>(t.vendors.size()) - 1;
  };
  std::vector<int> host_vendor;  // per host: all its ranks of this vendor; empty: the layout
  if (!host_vendor_text.empty()) {
    std::stringstream runs(host_vendor_text);
    std::string run;
    while (std::getline(runs, run, '+')) {
      auto colon = run.find(':');
      std::string name = run.substr(0, colon);
      double count = 0;
      if (name.empty() || colon == std::string::npos ||
          !spec_number("host_vendors " + name, run.substr(colon + 1), 1, &count, &st) ||
          count != std::floor(count))
        return st != HMC_SUCCESS
                   ? st
                   : fail(HMC_ERR_INVALID_ARGUMENT,
                          "cluster spec: host_vendors={}: wants NAME:HOSTS+NAME:HOSTS",
                          host_vendor_text);
      host_vendor.insert(host_vendor.end(), static_cast<size_t>(count), vendor_at(name));
    }
    if (host_vendor.size() != static_cast<size_t>(hosts))
      return fail(HMC_ERR_INVALID_ARGUMENT,
                  "cluster spec: host_vendors={} names {} hosts, hosts is {}", host_vendor_text,
                  host_vendor.size(), hosts);
    vendor_text.clear();
  }
  std::vector<int> layout;
  std::stringstream parts(vendor_text);
  std::string part;
  while (std::getline(parts, part, '+')) {
    auto colon = part.find(':');
    std::string name = part.substr(0, colon);
    double count = per_host;
    if (colon != std::string::npos &&
        !spec_number("vendors " + name, part.substr(colon + 1), 1, &count, &st))
      return st;
    if (name.empty() || count != std::floor(count))
      return fail(HMC_ERR_INVALID_ARGUMENT, "cluster spec: vendors={}: wants NAME:COUNT+NAME:COUNT",
                  vendor_text);
    layout.insert(layout.end(), static_cast<size_t>(count), vendor_at(name));
  }
  if (host_vendor.empty() && layout.size() != static_cast<size_t>(per_host))
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "cluster spec: vendors={} places {} ranks on a host, gpus_per_host is {}",
                vendor_text, layout.size(), per_host);
  for (int h = 0; h < static_cast<int>(hosts); ++h) {
    HostSpec hs;
    hs.name = fmt::format("host{}", h);
    hs.nics.assign(static_cast<size_t>(nics), nic);
    hs.memory_gbps = memory;
    hs.cores = static_cast<int>(cores);
    hs.cpu_gbps = cpu;
    for (int i = 0; i < static_cast<int>(per_host); ++i) {
      hs.ranks.push_back(static_cast<int>(t.vendor_of_rank.size()));
      t.vendor_of_rank.push_back(host_vendor.empty() ? layout[size_t(i)] : host_vendor[size_t(h)]);
    }
    t.hosts.push_back(std::move(hs));
  }
  st = finish(&t, "cluster spec");
  if (st != HMC_SUCCESS) return st;
  *out = std::move(t);
  return HMC_SUCCESS;
}

}  // namespace hmc::coll
