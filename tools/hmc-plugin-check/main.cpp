// hmc-plugin-check: runs plugins through the checks of hmc's plugin contract, as a vendor would
// before shipping one. Loads each plugin with the core's own loader (linked in), then exercises
// it: a net plugin over a loopback connection, a device plugin through memory, copies and IPC.
// See usage() and docs/plugins.md ("Checking a plugin").
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ccl_check.h"
#include "cli.h"
#include "device_check.h"
#include "exports.h"
#include "net_check.h"
#include "plugin/loader.h"
#include "report.h"
#include "rules.h"
#include "target.h"
#include "util/log.h"

namespace hmc::check {
namespace {

constexpr int kPass = 0, kFail = 1, kUsage = 2;

const char* kAbout =
    "Checks that hmc plugins keep the plugin contract (share/hmc/plugin-contract.md of the "
    "installation, cited by section under each failure): loads each as the core does (entry "
    "symbol, ABI version, table size, name, required slots), checks that it exports nothing "
    "else, then exercises it.\n"
    "  net:    device properties, a second context, a loopback connection over a device to\n"
    "          itself (tagged messages, ordering per tag, messages that arrive before their\n"
    "          receive, a large and a zero-byte message, truncation, cancel, wait_fd wake-ups,\n"
    "          peer loss and the messages kept after it), and with HMC_NET_FLAG_RMA\n"
    "          registration per device, put, get and the refusal of out-of-bounds accesses and\n"
    "          of accesses the registration did not grant;\n"
    "  device: device properties, a second context, allocation and pointer queries, copies\n"
    "          host->device->device->host completed through events, pinned host memory, and\n"
    "          per capability host registration, dma-buf export and IPC with another process.\n"
    "Every wait is bounded. Each failure is printed with the rule it breaks.";
const char* kFooter =
    "The plugins' own variables (HMC_<PLUGIN>_*) apply; HMC_LOG_LEVEL (default warn) sets how\n"
    "much of the core's and the plugins' logging is printed.\n"
    "Exit status: 0 when every plugin passed, 1 when a check failed, 2 on a usage error.";

int usage_error(const std::string& why) {
  std::fprintf(stderr, "hmc-plugin-check: %s\n(hmc-plugin-check --help for usage)\n", why.c_str());
  return kUsage;
}

struct Options {
  std::vector<Target> targets;
  int device = 0;  // -1: all
  int timeout_ms = 10000;
  bool require_devices = false;
  bool default_dirs = true;
};

// kPass when the arguments are good; kUsage (message printed) or -1 (help or version printed)
// when not.
int parse_args(int argc, char** argv, Options* o) {
  CLI::App app(kAbout, "hmc-plugin-check");
  hmc_tools::add_version(app, "hmc-plugin-check", HMC_TOOLS_VERSION);
  std::string device = "0";
  app.add_option("--device", device, "the device exercised: an index, or all (default 0)")
      ->type_name("N|all")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            char* end = nullptr;
            long n = std::strtol(v.c_str(), &end, 10);
            if (v == "all" || (!v.empty() && *end == '\0' && n >= 0 && n < 4096)) return "";
            return v + ": expected a device index or 'all'";
          },
          "N|all"));
  // At least 100 ms: a count of seconds, as this option once took, is refused, not taken as ms.
  hmc_tools::add_timeout(app, &o->timeout_ms, 100, 3600000, "the longest wait of one step");
  app.add_flag("--require-devices", o->require_devices,
               "fail a plugin that has no device here (default: the checks that need one are "
               "skipped)");
  bool no_default_dirs = false;
  app.add_flag("--no-default-dirs", no_default_dirs, "KIND:NAME: search HMC_PLUGIN_PATH only");
  std::vector<std::string> plugins;
  app.add_option("PLUGIN", plugins,
                 "a plugin file (path/to/libhmc-net-foo.so), or KIND:NAME (net:hoststage, "
                 "device:cuda) for a plugin found as the core finds it (HMC_PLUGIN_PATH, then "
                 "lib/hmc of the installation); files or KIND:NAME, not both");
  app.footer(kFooter);
  int rc = hmc_tools::parse(app, argc, argv);
  if (rc == 0) return -1;
  if (rc > 0) return kUsage;
  o->device = device == "all" ? -1 : std::atoi(device.c_str());
  o->default_dirs = !no_default_dirs;
  for (const std::string& a : plugins) {
    Target t;
    std::string why;
    if (!parse_target(a, &t, &why)) return usage_error(why);
    if (!o->targets.empty() && o->targets.front().file != t.file)
      return usage_error("give plugin files or KIND:NAME, not both");
    o->targets.push_back(t);
  }
  if (o->targets.empty()) return usage_error("no plugin to check");
  return kPass;
}

// Where the contract the failures cite is: share/hmc/ of the installation this program is in.
std::string contract_path(const char* self) {
  std::string dir = self;
  dir = dir.substr(0, dir.rfind('/'));
  std::string path = dir.substr(0, dir.rfind('/')) + "/share/hmc/plugin-contract.md";
  return ::access(path.c_str(), R_OK) == 0 ? path
                                           : "share/hmc/plugin-contract.md of hmc's installation";
}

std::string label(const plugin::Record* rec, const Target& t) {
  if (rec == nullptr) return t.arg;
  return std::string(plugin::kind_name(rec->kind)) + "/" + rec->name;
}

// The loader's verdict. True when the plugin is loaded and can be exercised.
bool check_load(const plugin::Record* rec, const Target& t, const Options& o, Report& r) {
  if (rec == nullptr) {
    r.fail("load", rule::kLoad, "the loader did not find %s",
           t.file ? "the file (not a plugin file name, and no entry symbol?)"
                  : "it on HMC_PLUGIN_PATH or in the default directory");
    return false;
  }
  switch (rec->state) {
    case plugin::State::Loaded:
      r.ok("load", "version %s, ABI %u, table of %u bytes%s%s", rec->version.c_str(),
           rec->abi_version, rec->table_size, rec->reason.empty() ? "" : "; ", rec->reason.c_str());
      return true;
    case plugin::State::NoDevice:
      if (o.require_devices)
        r.fail("load", rule::kNoDevice, "%s (--require-devices)", rec->reason.c_str());
      else
        r.skip("load", "init answered NO_DEVICE, so nothing is exercised: %s", rec->reason.c_str());
      return false;
    default:
      r.fail("load", rule::kLoad, "%s: %s", plugin::state_name(rec->state), rec->reason.c_str());
      return false;
  }
}

void check_exports(const plugin::Record* rec, Report& r) {
  if (rec == nullptr || rec->path.empty() || rec->kind == plugin::Kind::Unknown) return;
  std::vector<std::string> names;
  std::string why;
  if (!exported_symbols(rec->path, &names, &why)) {
    r.skip("exports", "cannot read the exported symbols: %s", why.c_str());
    return;
  }
  const char* entry = rec->kind == plugin::Kind::Net   ? HMC_NET_PLUGIN_ENTRY_V2
                      : rec->kind == plugin::Kind::Ccl ? HMC_CCL_PLUGIN_ENTRY_V1
                                                       : HMC_DEVICE_PLUGIN_ENTRY_V1;
  std::string others;
  bool has_entry = false;
  for (const std::string& n : names) {
    if (n == entry)
      has_entry = true;
    else
      others += (others.empty() ? "" : ", ") + n;
  }
  if (!has_entry) {
    r.skip("exports", "it does not export %s", entry);  // the loader's verdict says why
    return;
  }
  if (others.size() > 300) others = others.substr(0, 300) + "...";
  if (!others.empty())
    r.fail("exports", rule::kExports, "besides %s it exports %s", entry, others.c_str());
  else
    r.ok("exports", "%s only", entry);
}

int run(const Options& o, const char* self) {
  // Per step; only a slot that never returns trips it (every wait is bounded by the timeout).
  arm_watchdog(static_cast<unsigned>(o.timeout_ms / 100 + 30));
  watch_step("loading (the plugins' init)");
  auto loader = load_targets(o.targets, o.default_dirs);
  int failed_plugins = 0;
  for (const Target& t : o.targets) {
    const plugin::Record* rec = find_record(*loader, t);
    std::printf("%s%s%s\n", label(rec, t).c_str(), rec != nullptr ? " from " : "",
                rec != nullptr ? rec->path.c_str() : "");
    Report r;
    r.step("load");
    const bool loaded = check_load(rec, t, o, r);
    check_exports(rec, r);
    const auto timeout = std::chrono::milliseconds(o.timeout_ms);
    if (loaded && rec->kind == plugin::Kind::Net) {
      check_net({rec->net, rec->net_ctx, rec->host}, NetOptions{o.device, timeout}, r);
    } else if (loaded && rec->kind == plugin::Kind::Ccl) {
      check_ccl({rec->ccl, rec->ccl_ctx}, o.require_devices, r);
    } else if (loaded && rec->kind == plugin::Kind::Device) {
      check_device({rec->device, rec->device_ctx, rec->host, rec->path},
                   DeviceOptions{o.device, timeout, o.require_devices, self}, r);
    }
    const bool pass = r.failed() == 0;
    if (!pass) ++failed_plugins;
    std::printf("%s: %s (%d passed, %d failed, %d warnings, %d skipped)\n", label(rec, t).c_str(),
                pass ? "PASS" : "FAIL", r.passed(), r.failed(), r.warned(), r.skipped());
  }
  watch_step("finalize");
  loader->finalize_all();
  disarm_watchdog();
  if (failed_plugins != 0) std::printf("The rules cited: %s\n", contract_path(self).c_str());
  std::printf("%s\n", failed_plugins == 0 ? "PASS" : "FAIL");
  return failed_plugins == 0 ? kPass : kFail;
}

}  // namespace
}  // namespace hmc::check

int main(int argc, char** argv) {
  using namespace hmc::check;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines interleave with the log on stderr

  const char* level_text = std::getenv("HMC_LOG_LEVEL");
  int level = HMC_LOG_WARN;
  if (level_text != nullptr) hmc::log::parse_level(level_text, &level);
  set_log_level(level);

  if (argc > 1 && std::strcmp(argv[1], "--ipc-peer") == 0)
    return ipc_peer_main(std::vector<std::string>(argv + 2, argv + argc));

  Options o;
  int st = parse_args(argc, argv, &o);
  if (st != kPass) return st == -1 ? kPass : st;
  // The IPC peer is this program: its own file, not argv[0] (which PATH may have resolved).
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  self[n > 0 ? n : 0] = '\0';
  return run(o, self);
}
