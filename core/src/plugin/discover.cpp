#include "plugin/discover.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>

namespace hmc::plugin {
namespace {

std::string real_path(const std::string& p) {
  char buf[PATH_MAX];
  if (!realpath(p.c_str(), buf)) return "";
  return buf;
}

std::string dir_name(const std::string& p) {
  size_t slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return p.substr(0, slash);
}

std::string base_name(const std::string& p) {
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

bool is_dir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The anchor whose address tells dladdr which object holds the core.
void core_anchor() {}

class Collector {
 public:
  explicit Collector(Discovery* out) : out_(out) {}

  void add_file(const std::string& path, const std::string& origin) {
    std::string real = real_path(path);
    if (real.empty()) return;
    if (!seen_.insert(real).second) return;  // reached twice (a symlink, or a repeated entry)
    Candidate c;
    c.path = real;
    c.origin = origin;
    // The convention is judged on the name as found (a symlink named libhmc-net-x.so counts).
    c.conventional = parse_plugin_file_name(base_name(path), &c.kind, &c.name);
    out_->candidates.push_back(std::move(c));
  }

  // Returns how many plugin files the directory holds.
  size_t scan_dir(const std::string& dir, const std::string& origin) {
    out_->searched.push_back(dir);
    std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(dir.c_str()), closedir);
    if (!d) {
      out_->problems.push_back(
          fmt::format("cannot read plugin directory {}: {}", dir, strerror(errno)));
      return 0;
    }
    std::vector<std::string> names;
    while (struct dirent* e = readdir(d.get())) {
      Kind kind;
      std::string name;
      // A file whose name part is not a valid plugin name is still taken, so that the loader
      // reports it instead of ignoring it silently.
      if (parse_plugin_file_name(e->d_name, &kind, &name)) names.emplace_back(e->d_name);
    }
    std::sort(names.begin(), names.end());
    for (const auto& n : names) {
      std::string p = dir + "/" + n;
      struct stat st;
      if (stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode)) add_file(p, origin);
    }
    return names.size();
  }

 private:
  Discovery* out_;
  std::set<std::string> seen_;
};

}  // namespace

bool parse_plugin_file_name(const std::string& base, Kind* kind, std::string* name) {
  static const struct {
    const char* prefix;
    Kind kind;
  } kinds[] = {
      {"libhmc-device-", Kind::Device}, {"libhmc-net-", Kind::Net}, {"libhmc-ccl-", Kind::Ccl}};
  const std::string suffix = ".so";
  for (const auto& k : kinds) {
    size_t plen = strlen(k.prefix);
    if (base.size() <= plen + suffix.size()) continue;
    if (base.compare(0, plen, k.prefix) != 0) continue;
    if (base.compare(base.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    *kind = k.kind;
    *name = base.substr(plen, base.size() - plen - suffix.size());
    return !name->empty() && name->find('/') == std::string::npos;
  }
  return false;
}

std::string core_object_path() {
  Dl_info info;
  struct link_map* map = nullptr;
  if (!dladdr1(reinterpret_cast<void*>(&core_anchor), &info, reinterpret_cast<void**>(&map),
               RTLD_DL_LINKMAP))
    return "";
  // The main program's link map has an empty name, and dladdr then reports argv[0], which may
  // be relative to a directory we are no longer in: ask the kernel instead.
  if (!map || !map->l_name || map->l_name[0] == '\0') return real_path("/proc/self/exe");
  return real_path(map->l_name);
}

std::vector<std::string> default_plugin_dirs() {
  std::string obj = core_object_path();
  if (obj.empty()) return {};
  std::string dir = dir_name(obj);
  for (const std::string& d : {dir + "/hmc", dir + "/../lib/hmc"}) {
    if (is_dir(d)) return {real_path(d)};
  }
  return {};
}

Discovery discover(const std::string& plugin_path, bool search_default_dirs) {
  Discovery out;
  Collector collect(&out);
  size_t start = 0;
  while (start <= plugin_path.size()) {
    size_t colon = plugin_path.find(':', start);
    if (colon == std::string::npos) colon = plugin_path.size();
    std::string entry = plugin_path.substr(start, colon - start);
    start = colon + 1;
    if (entry.empty()) continue;
    struct stat st;
    if (stat(entry.c_str(), &st) != 0) {
      out.problems.push_back(
          fmt::format("HMC_PLUGIN_PATH entry '{}' does not exist ({})", entry, strerror(errno)));
    } else if (S_ISDIR(st.st_mode)) {
      // A folder the user named that holds nothing loadable is almost always a wrong path or a
      // misnamed file: say so, rather than quietly going on with the default directories.
      if (collect.scan_dir(real_path(entry), "HMC_PLUGIN_PATH") == 0)
        out.problems.push_back(fmt::format(
            "HMC_PLUGIN_PATH directory '{}' holds no plugin (files are found by the names "
            "libhmc-net-<name>.so, libhmc-device-<name>.so and libhmc-ccl-<name>.so)",
            entry));
    } else if (S_ISREG(st.st_mode)) {
      out.searched.push_back(real_path(entry));
      collect.add_file(entry, "HMC_PLUGIN_PATH");
    } else {
      out.problems.push_back(
          fmt::format("HMC_PLUGIN_PATH entry '{}' is neither a directory nor a file", entry));
    }
  }
  if (search_default_dirs) {
    for (const auto& dir : default_plugin_dirs()) collect.scan_dir(dir, "default directory");
  }
  return out;
}

}  // namespace hmc::plugin
