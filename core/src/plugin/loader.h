// The plugin loader: finds plugin shared objects, applies the deploy-time selection, dlopens and
// validates them, declares their configuration variables, and initialises them with host
// services. A broken plugin never makes loading fail: it is skipped, and its record says why.
//
//   hmc::Config cfg;  cfg.load_from_environment();
//   hmc::plugin::Loader loader;
//   loader.load(cfg);                       // logs one summary of what loaded and what not
//   for (Record* r : loader.loaded(Kind::Net)) use(r->net, r->net_ctx);
//   loader.finalize_all();                  // or let the destructor do it
//
// Where plugins are searched: see discover.h. Selection (HMC_DEVICE_PLUGINS, HMC_NET_PLUGINS,
// HMC_CCL_PLUGINS):
// see select.h; plugins excluded by it are not dlopened when their file name follows the
// libhmc-<kind>-<name>.so convention (files of other names given explicitly in HMC_PLUGIN_PATH
// must be opened to learn their name, but are never initialised unless selected).
//
// Teardown never relies on dlclose: finalize_all calls each plugin's finalize slot; objects whose
// init ran stay mapped for the life of the process (a plugin may have threads winding down,
// atexit handlers or thread-local destructors pointing into its code). Objects that were only
// probed (broken, excluded after opening, shadowed) are dlclosed at once.
//
// Not thread-safe: load and finalize_all run on one thread; between them, records() and
// loaded() may be read from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hmc/hmc.h"
#include "hmc/plugin/ccl.h"
#include "hmc/plugin/device.h"
#include "hmc/plugin/net.h"
#include "plugin/discover.h"
#include "plugin/kind.h"
#include "util/config.h"

namespace hmc::plugin {

// What became of a plugin file.
enum class State {
  Loaded,       // initialised; in use
  Broken,       // invalid or failed: logged as a warning
  NoDevice,     // init answered HMC_PLUGIN_ERR_NO_DEVICE: valid, nothing to drive here
  NotSelected,  // excluded, or not listed, by HMC_<KIND>_PLUGINS
  Shadowed,     // a plugin of the same kind and name was found earlier in the search order
};
const char* state_name(State state);  // "loaded", "broken", "no device", "not selected", "shadowed"

// One plugin file found.
struct Record {
  Kind kind = Kind::Unknown;
  // The plugin's name: the table's name once read; for a libhmc-<kind>-<name>.so file, <name>
  // (also when the table could not be read); otherwise the file's base name.
  std::string name;
  std::string path;          // realpath of the .so
  std::string origin;        // "HMC_PLUGIN_PATH" or "default directory"
  uint32_t abi_version = 0;  // the table's hdr.abi_version; 0 when unknown
  uint32_t table_size = 0;   // the table's hdr.struct_size; 0 when unknown
  std::string version;       // the plugin's own version text, "" when unknown
  std::string vendor;        // device plugins: the vendor text
  State state = State::Broken;
  bool loaded = false;     // loaded and initialised (stays true after finalize_all)
  bool finalized = false;  // finalize_all has run its finalize slot
  // Why it was skipped; for a loaded device plugin with 0 devices, "0 devices: <its reason>".
  std::string reason;
  int device_count = 0;  // loaded plugins: devices reported after init

  // Set only while loaded and not finalized. The table is the loader's copy, zero-extended to the
  // core's full v1 size: hdr.struct_size is sizeof the v1 table, and a slot the plugin's (possibly
  // shorter) table lacks is NULL. Check an optional slot for NULL, nothing more.
  const hmc_net_plugin_v2_t* net = nullptr;
  hmc_net_ctx_t* net_ctx = nullptr;
  // The services the plugin was initialised with; valid as long as the record (a second
  // context of the plugin may be created with them, as calibration does).
  const hmc_host_services_t* host = nullptr;
  const hmc_device_plugin_v1_t* device = nullptr;
  hmc_device_ctx_t* device_ctx = nullptr;
  const hmc_ccl_plugin_v1_t* ccl = nullptr;
  hmc_ccl_ctx_t* ccl_ctx = nullptr;
  // ccl plugins: the vendor library and its version as the plugin opened it, "" when none.
  std::string library;

  Record();
  ~Record();
  Record(const Record&) = delete;
  Record& operator=(const Record&) = delete;

  // dl handle, host services, table copy: owned here, opaque to users.
  struct Internal;
  std::unique_ptr<Internal> internal;
};

struct LoaderOptions {
  // Search the default directory (lib/hmc beside the core) after HMC_PLUGIN_PATH. Tests turn it
  // off to see only their own plugins.
  bool search_default_dirs = true;
};

class Loader {
 public:
  explicit Loader(LoaderOptions options = {});
  ~Loader();  // finalize_all()
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Discovers, selects, dlopens (RTLD_NOW | RTLD_LOCAL), validates and initialises every plugin,
  // and declares each one's config_vars into cfg (owner = plugin name, type String). Plugins read
  // configuration from a snapshot of cfg taken here, so cfg need not outlive the loader. Logs the
  // outcome once. Fails when called a second time (HMC_ERR_INTERNAL) and when a plugin's init
  // answered HMC_PLUGIN_ERR_CONFIG (HMC_ERR_CONFIG naming the plugin and what it logged); any
  // other plugin failure only skips that plugin.
  hmc_status_t load(Config& cfg);

  // Calls finalize of every loaded plugin, in the reverse order of their init. Idempotent.
  void finalize_all();

  // Every plugin file found, in search order.
  const std::vector<std::unique_ptr<Record>>& records() const { return records_; }
  // Loaded (and not finalized) plugins of a kind, in order of preference: the selection
  // variable's order when it lists names, else search order.
  std::vector<Record*> loaded(Kind kind) const;
  // The record of the plugin of that kind and name that was used or skipped, or nullptr.
  const Record* find(Kind kind, const std::string& name) const;
  // Directories and files searched, in order (for hmc-info and messages).
  const std::vector<std::string>& searched() const { return searched_; }

 private:
  struct Selections;
  void load_one(const Candidate& candidate, Record& rec, Config& cfg);
  // Declares config vars, runs init and the post-init checks. rec.internal holds the table copy.
  void initialise(Record& rec, Config& cfg, const hmc_config_var_t* vars);
  // False (and rec marked Shadowed) when a plugin of the same kind and name came first.
  bool claim(Record& rec);
  void warn_unknown_selected() const;
  void log_summary() const;

  LoaderOptions options_;
  bool load_called_ = false;
  bool keep_library_signals_ = false;  // HMC_LIBRARY_SIGNALS=keep
  Config snapshot_;                    // what config_get reads; fixed after load()
  uint32_t timeout_ms_ = 0;
  std::vector<std::unique_ptr<Record>> records_;
  std::vector<Record*> init_order_;
  std::vector<std::string> searched_;
  std::unique_ptr<Selections> selections_;
  std::string config_error_;  // the first plugin whose own variable had an invalid value
};

}  // namespace hmc::plugin
