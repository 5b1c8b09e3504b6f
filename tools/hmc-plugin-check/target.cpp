#include "target.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "util/config.h"

namespace hmc::check {

bool parse_target(const std::string& arg, Target* out, std::string* why) {
  Target t;
  t.arg = arg;
  size_t colon = arg.find(':');
  if (arg.rfind("net:", 0) == 0 || arg.rfind("device:", 0) == 0) {
    t.file = false;
    t.kind = arg[0] == 'n' ? plugin::Kind::Net : plugin::Kind::Device;
    t.name = arg.substr(colon + 1);
    if (t.name.empty()) {
      *why = "'" + arg + "': no plugin name after the kind";
      return false;
    }
    *out = t;
    return true;
  }
  struct stat st {};
  const int rc = ::stat(arg.c_str(), &st);
  if (rc != 0 || !S_ISREG(st.st_mode)) {
    const char* what = rc != 0 ? std::strerror(errno) : "not a regular file";
    *why = "'" + arg + "' is neither a plugin file (" + what +
           ") nor KIND:NAME (net:NAME, device:NAME)";
    return false;
  }
  char* real = ::realpath(arg.c_str(), nullptr);
  t.path = real != nullptr ? real : arg;
  ::free(real);
  *out = t;
  return true;
}

std::unique_ptr<plugin::Loader> load_targets(const std::vector<Target>& targets,
                                             bool default_dirs) {
  plugin::LoaderOptions options;
  if (!targets.empty() && targets.front().file) {
    std::string path;
    for (const Target& t : targets) path += (path.empty() ? "" : ":") + t.path;
    ::setenv("HMC_PLUGIN_PATH", path.c_str(), 1);
    ::unsetenv("HMC_NET_PLUGINS");
    ::unsetenv("HMC_DEVICE_PLUGINS");
    options.search_default_dirs = false;
  } else {
    std::string net, device;
    for (const Target& t : targets) {
      std::string& list = t.kind == plugin::Kind::Net ? net : device;
      list += (list.empty() ? "" : ",") + t.name;
    }
    if (!net.empty()) ::setenv("HMC_NET_PLUGINS", net.c_str(), 1);
    if (!device.empty()) ::setenv("HMC_DEVICE_PLUGINS", device.c_str(), 1);
    options.search_default_dirs = default_dirs;
  }
  Config cfg;
  cfg.load_from_environment();  // an invalid core variable is logged; the loader still runs
  auto loader = std::make_unique<plugin::Loader>(options);
  loader->load(cfg);
  return loader;
}

const plugin::Record* find_record(const plugin::Loader& loader, const Target& target) {
  if (!target.file) return loader.find(target.kind, target.name);
  for (const auto& r : loader.records())
    if (r->path == target.path) return r.get();
  return nullptr;
}

}  // namespace hmc::check
