// config_doc_gen: prints the configuration tables of docs/configuration.md.
//
//   config_doc_gen PLUGIN_DIR [SECTION...]
//
// Reads the same tables as `hmc-info --config` (the core's table in core/src/util/config.cpp and
// the config_vars of every plugin in PLUGIN_DIR, declared through the plugin loader) and prints
// them with hmc-info's Markdown printer. It reads the tables themselves rather than going through
// hmc_config_entry, whose fixed-size fields cut help texts at 255 bytes. Every HMC_ variable of
// the caller's environment is ignored, so the output depends on the tables alone.
//
// Each SECTION ("core", "net-hoststage", "device-cuda") must appear in the output; when one does
// not (its plugin was not built or did not load here) the program says which and exits 77, the
// status ctest reads as "skipped". Exit status 0 otherwise, 2 on a usage error.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../../tools/hmc-info/config_markdown.h"
#include "plugin/loader.h"
#include "util/config.h"

extern char** environ;

namespace {

// Unsets every HMC_ variable, so that neither plugin selection nor a search path of the caller's
// changes what is listed.
void clear_hmc_environment() {
  std::vector<std::string> names;
  for (char** e = environ; e && *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq && std::strncmp(*e, "HMC_", 4) == 0) names.emplace_back(*e, eq - *e);
  }
  for (const auto& n : names) unsetenv(n.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: %s PLUGIN_DIR [SECTION...]\n", argv[0]);
    return 2;
  }
  clear_hmc_environment();
  setenv("HMC_PLUGIN_PATH", argv[1], 1);

  hmc::Config cfg;
  if (cfg.load_from_environment() != HMC_SUCCESS) {
    std::fprintf(stderr, "config_doc_gen: the core's table does not load\n");
    return 1;
  }
  hmc::plugin::LoaderOptions options;
  options.search_default_dirs = false;
  hmc::plugin::Loader loader(options);
  if (loader.load(cfg) != HMC_SUCCESS) {
    std::fprintf(stderr, "config_doc_gen: the plugin loader failed\n");
    return 1;
  }

  std::vector<hmc_info::ConfigDocEntry> entries;
  for (const auto& v : cfg.declared()) {
    std::string section = v.owner.empty() ? "core" : v.owner;
    for (const auto& rec : loader.records())
      if (rec->name == v.owner && rec->kind != hmc::plugin::Kind::Unknown)
        section = std::string(hmc::plugin::kind_name(rec->kind)) + "-" + v.owner;
    entries.push_back({v.name, v.default_value, v.help, section});
  }

  std::vector<std::string> missing;
  for (int i = 2; i < argc; ++i) {
    bool found = false;
    for (const auto& e : entries) found = found || e.section == argv[i];
    if (!found) missing.push_back(argv[i]);
  }
  if (!missing.empty()) {
    for (const auto& m : missing) {
      std::string why = "no such plugin file in " + std::string(argv[1]);
      for (const auto& rec : loader.records())
        if (std::string(hmc::plugin::kind_name(rec->kind)) + "-" + rec->name == m)
          why = std::string(hmc::plugin::state_name(rec->state)) +
                (rec->reason.empty() ? "" : ": " + rec->reason);
      std::fprintf(stderr, "config_doc_gen: %s declared no variables here (%s)\n", m.c_str(),
                   why.c_str());
    }
    return 77;
  }
  hmc_info::print_config_markdown(entries, stdout);
  return 0;
}
