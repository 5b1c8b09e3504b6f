#include "plugin/loader.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <link.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>

#include "plugin/host_services.h"
#include "plugin/select.h"
#include "plugin/signal_guard.h"
#include "plugin/validate.h"
#include "util/log.h"
#include "util/status.h"

namespace hmc::plugin {

namespace detail {
// A dlopen handle. Closed on destruction unless keep_open() was called (see loader.h: an object
// whose init ran stays mapped for the life of the process).
class DlHandle {
 public:
  DlHandle() = default;
  DlHandle(const DlHandle&) = delete;
  DlHandle& operator=(const DlHandle&) = delete;
  ~DlHandle() {
    if (handle_ && !keep_) dlclose(handle_);
  }
  void reset(void* handle) {
    if (handle_ && !keep_) dlclose(handle_);
    handle_ = handle;
    keep_ = false;
  }
  void* get() const { return handle_; }
  void keep_open() { keep_ = true; }

 private:
  void* handle_ = nullptr;
  bool keep_ = false;
};
}  // namespace detail

struct Record::Internal {
  detail::DlHandle handle;
  std::unique_ptr<HostServices> host;
  // Zero-extended copies of the plugin's table (see Record::net).
  std::unique_ptr<hmc_net_plugin_v2_t> net_table;
  std::unique_ptr<hmc_device_plugin_v1_t> device_table;
  std::unique_ptr<hmc_ccl_plugin_v1_t> ccl_table;
  bool claimed = false;  // this record holds its (kind, name) against later ones
};

Record::Record() : internal(std::make_unique<Internal>()) {}
Record::~Record() = default;

const char* state_name(State state) {
  switch (state) {
    case State::Loaded: return "loaded";
    case State::Broken: return "broken";
    case State::NoDevice: return "no device";
    case State::NotSelected: return "not selected";
    case State::Shadowed: return "shadowed";
  }
  return "?";
}

struct Loader::Selections {
  Selection device;
  Selection net;
  Selection ccl;
  const Selection& of(Kind kind) const {
    return kind == Kind::Device ? device : kind == Kind::Ccl ? ccl : net;
  }
};

namespace {

constexpr int kMaxConfigVars = 256;  // a config_vars array longer than this lacks its terminator

std::string base_name(const std::string& p) {
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

// "" when the file starts like an ELF object, else why it cannot be a plugin.
std::string elf_problem(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fmt::format("cannot open the file: {}", strerror(errno));
  char magic[4] = {};
  in.read(magic, sizeof magic);
  if (in.gcount() != 4 || memcmp(magic, "\177ELF", 4) != 0)
    return "not a shared object (no ELF header)";
  return "";
}

std::string dl_error_text() {
  const char* e = dlerror();
  return e ? e : "unknown dlerror";
}

// The object that defines `sym`, when it is not the object behind `handle`; "" when it is.
std::string foreign_definer(void* handle, void* sym) {
  struct link_map* own = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &own) != 0 || !own) return "";  // cannot tell: accept
  Dl_info info;
  struct link_map* where = nullptr;
  if (!dladdr1(sym, &info, reinterpret_cast<void**>(&where), RTLD_DL_LINKMAP))
    return "an unknown object";
  if (where == own) return "";
  if (where && where->l_name && where->l_name[0]) return where->l_name;
  return info.dli_fname ? info.dli_fname : "an unknown object";
}

template <typename Table>
std::unique_ptr<Table> zero_extended_copy(const Table* t) {
  auto copy = std::make_unique<Table>();
  memset(copy.get(), 0, sizeof(Table));
  memcpy(copy.get(), t, std::min<size_t>(t->hdr.struct_size, sizeof(Table)));
  copy->hdr.struct_size = sizeof(Table);
  return copy;
}

std::string text_or_empty(const char* s) {
  return s ? std::string(s) : std::string();
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

void mark(Record& rec, State state, std::string reason) {
  rec.state = state;
  rec.reason = std::move(reason);
}

}  // namespace

Loader::Loader(LoaderOptions options) : options_(options) {}

Loader::~Loader() {
  finalize_all();
}

bool Loader::claim(Record& rec) {
  for (const auto& other : records_) {
    if (other->internal->claimed && other->kind == rec.kind && other->name == rec.name) {
      mark(rec, State::Shadowed, "shadowed by " + other->path);
      return false;
    }
  }
  rec.internal->claimed = true;
  return true;
}

hmc_status_t Loader::load(Config& cfg) {
  if (load_called_) return fail(HMC_ERR_INTERNAL, "plugin loader: load() was called twice");
  load_called_ = true;
  snapshot_ = cfg;
  int64_t timeout = cfg.get_int("HMC_TIMEOUT_MS");
  timeout_ms_ =
      static_cast<uint32_t>(std::clamp<int64_t>(timeout, 0, std::numeric_limits<uint32_t>::max()));
  const std::string signals = cfg.get("HMC_LIBRARY_SIGNALS");
  if (signals != "restore" && signals != "keep")
    return fail(HMC_ERR_CONFIG, "HMC_LIBRARY_SIGNALS={}: expected restore or keep", signals);
  keep_library_signals_ = signals == "keep";
  selections_ = std::make_unique<Selections>();
  selections_->device = Selection("HMC_DEVICE_PLUGINS", cfg.get_list("HMC_DEVICE_PLUGINS"));
  selections_->net = Selection("HMC_NET_PLUGINS", cfg.get_list("HMC_NET_PLUGINS"));
  selections_->ccl = Selection("HMC_CCL_PLUGINS", cfg.get_list("HMC_CCL_PLUGINS"));

  Discovery found = discover(cfg.get("HMC_PLUGIN_PATH"), options_.search_default_dirs);
  searched_ = found.searched;
  for (const auto& problem : found.problems) HMC_LOG_W("{}", problem);

  for (const Candidate& c : found.candidates) {
    auto rec = std::make_unique<Record>();
    rec->path = c.path;
    rec->origin = c.origin;
    rec->name = c.conventional ? c.name : base_name(c.path);
    rec->kind = c.conventional ? c.kind : Kind::Unknown;
    try {
      SignalGuard guard(fmt::format("plugin {}", rec->name), keep_library_signals_);
      load_one(c, *rec, cfg);
    } catch (const std::exception& e) {
      mark(*rec, State::Broken, fmt::format("internal error while loading: {}", e.what()));
    } catch (...) {
      mark(*rec, State::Broken, "internal error while loading");
    }
    records_.push_back(std::move(rec));
  }
  warn_unknown_selected();
  log_summary();
  // A plugin's own variable is configuration like the core's: a bad value stops the context
  // rather than quietly losing the plugin the user configured.
  if (!config_error_.empty()) return fail(HMC_ERR_CONFIG, "{}", config_error_);
  return HMC_SUCCESS;
}

void Loader::load_one(const Candidate& c, Record& rec, Config& cfg) {
  if (c.conventional) {
    // The name is known without opening the file: shadowing and selection come first, so that an
    // excluded or duplicate plugin is never mapped.
    if (!claim(rec)) return;
    const Selection& sel = selections_->of(rec.kind);
    switch (sel.judge(rec.name)) {
      case Selection::Verdict::Excluded:
        return mark(rec, State::NotSelected, "excluded by " + sel.var());
      case Selection::Verdict::NotListed:
        return mark(rec, State::NotSelected, "not listed in " + sel.var());
      case Selection::Verdict::Use: break;
    }
  }

  std::string bad = elf_problem(c.path);
  if (!bad.empty()) return mark(rec, State::Broken, bad);

  dlerror();
  void* handle = dlopen(c.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return mark(rec, State::Broken, "dlopen failed: " + dl_error_text());
  rec.internal->handle.reset(handle);

  // The kind comes from the entry symbol the object exports; a conventional file name says which
  // one it must export.
  struct Entry {
    Kind kind;
    const char* symbol;
    void* sym;
  } entries[] = {
      {Kind::Device, HMC_DEVICE_PLUGIN_ENTRY_V1, dlsym(handle, HMC_DEVICE_PLUGIN_ENTRY_V1)},
      {Kind::Net, HMC_NET_PLUGIN_ENTRY_V2, dlsym(handle, HMC_NET_PLUGIN_ENTRY_V2)},
      {Kind::Ccl, HMC_CCL_PLUGIN_ENTRY_V1, dlsym(handle, HMC_CCL_PLUGIN_ENTRY_V1)}};
  bool any = entries[0].sym || entries[1].sym || entries[2].sym;
  // A net plugin of the previous ABI: its memory model cannot be served, so it is refused.
  if (!any && dlsym(handle, HMC_NET_PLUGIN_ENTRY_V1))
    return mark(rec, State::Broken,
                fmt::format("it exports {} (net ABI 1); this core loads net ABI {} ({}): rebuild "
                            "the plugin against this SDK, whose net.h says what changed",
                            HMC_NET_PLUGIN_ENTRY_V1, HMC_NET_ABI_VERSION, HMC_NET_PLUGIN_ENTRY_V2));
  void* sym = nullptr;
  const char* sym_name = nullptr;
  if (c.conventional) {
    for (const Entry& e : entries)
      if (e.kind == rec.kind) {
        sym = e.sym;
        sym_name = e.symbol;
      }
    if (!sym) {
      std::string hint;
      for (const Entry& e : entries)
        if (e.kind != rec.kind && e.sym && hint.empty())
          hint = fmt::format(" (it exports {}: name the file libhmc-{}-{}.so)", e.symbol,
                             kind_name(e.kind), rec.name);
      return mark(rec, State::Broken, fmt::format("missing entry symbol {}{}", sym_name, hint));
    }
  } else {
    // Only symbols the object defines itself tell its kind; one found in a dependency is reported
    // below like any entry that resolves elsewhere.
    std::vector<const Entry*> own;
    for (const Entry& e : entries)
      if (e.sym && foreign_definer(handle, e.sym).empty()) own.push_back(&e);
    if (own.size() > 1)
      return mark(rec, State::Broken,
                  fmt::format("exports both {} and {}: name the file libhmc-<kind>-<name>.so to "
                              "say which it is",
                              own[0]->symbol, own[1]->symbol));
    if (!any)
      return mark(rec, State::Broken,
                  fmt::format("missing entry symbol (exports neither {} nor {} nor {})",
                              HMC_DEVICE_PLUGIN_ENTRY_V1, HMC_NET_PLUGIN_ENTRY_V2,
                              HMC_CCL_PLUGIN_ENTRY_V1));
    const Entry* pick = own.empty() ? nullptr : own[0];
    for (const Entry& e : entries)
      if (!pick && e.sym) pick = &e;
    rec.kind = pick->kind;
    sym = pick->sym;
    sym_name = pick->symbol;
  }

  // dlsym also searches the plugin's dependencies: the entry must be the plugin's own.
  std::string definer = foreign_definer(handle, sym);
  if (!definer.empty())
    return mark(
        rec, State::Broken,
        fmt::format("entry symbol {} resolves to {}, not to the plugin itself", sym_name, definer));

  const hmc_abi_header_t* hdr = nullptr;
  const char* table_name = nullptr;
  const hmc_config_var_t* vars = nullptr;
  std::string problem;
  if (rec.kind == Kind::Net) {
    const hmc_net_plugin_v2_t* t = reinterpret_cast<hmc_net_plugin_v2_entry_t>(sym)();
    if (!t) return mark(rec, State::Broken, fmt::format("entry {}() returned NULL", sym_name));
    hdr = &t->hdr;
    problem = check_net_table(t);
    if (problem.empty()) {
      rec.internal->net_table = zero_extended_copy(t);
      table_name = t->name;
      rec.version = text_or_empty(t->version);
      vars = t->config_vars;
    }
  } else if (rec.kind == Kind::Ccl) {
    const hmc_ccl_plugin_v1_t* t = reinterpret_cast<hmc_ccl_plugin_v1_entry_t>(sym)();
    if (!t) return mark(rec, State::Broken, fmt::format("entry {}() returned NULL", sym_name));
    hdr = &t->hdr;
    problem = check_ccl_table(t);
    if (problem.empty()) {
      rec.internal->ccl_table = zero_extended_copy(t);
      table_name = t->name;
      rec.version = text_or_empty(t->version);
      vars = t->config_vars;
    }
  } else {
    const hmc_device_plugin_v1_t* t = reinterpret_cast<hmc_device_plugin_v1_entry_t>(sym)();
    if (!t) return mark(rec, State::Broken, fmt::format("entry {}() returned NULL", sym_name));
    hdr = &t->hdr;
    problem = check_device_table(t);
    if (problem.empty()) {
      rec.internal->device_table = zero_extended_copy(t);
      table_name = t->name;
      rec.version = text_or_empty(t->version);
      rec.vendor = text_or_empty(t->vendor);
      vars = t->config_vars;
    }
  }
  rec.abi_version = hdr->abi_version;
  rec.table_size = hdr->struct_size;
  if (!problem.empty()) return mark(rec, State::Broken, problem);

  if (c.conventional) {
    if (rec.name != table_name)
      return mark(
          rec, State::Broken,
          fmt::format("the table's name '{}' does not match the file name {} (expected '{}')",
                      table_name, base_name(c.path), rec.name));
  } else {
    // A file of another name: its name is known only now.
    rec.name = table_name;
    if (!claim(rec)) return;
    const Selection& sel = selections_->of(rec.kind);
    switch (sel.judge(rec.name)) {
      case Selection::Verdict::Excluded:
        return mark(rec, State::NotSelected, "excluded by " + sel.var());
      case Selection::Verdict::NotListed:
        return mark(rec, State::NotSelected, "not listed in " + sel.var());
      case Selection::Verdict::Use: break;
    }
  }
  initialise(rec, cfg, vars);
}

void Loader::initialise(Record& rec, Config& cfg, const hmc_config_var_t* vars) {
  // Declared variables are checked whole before any is declared, so that a bad array leaves no
  // half-declared plugin behind.
  std::vector<ConfigVar> declared;
  for (int i = 0; vars; ++i) {
    if (i == kMaxConfigVars)
      return mark(rec, State::Broken,
                  fmt::format("config_vars has no terminating entry (name NULL) within {} entries",
                              kMaxConfigVars));
    if (!vars[i].name) break;
    std::string n = vars[i].name;
    if (n.size() <= 4 || n.compare(0, 4, "HMC_") != 0)
      return mark(
          rec, State::Broken,
          fmt::format("config_vars[{}] is named '{:.80}', which does not start with HMC_", i, n));
    declared.push_back({n, ConfigType::String, text_or_empty(vars[i].default_value),
                        text_or_empty(vars[i].help), rec.name});
  }
  for (const auto& v : declared) {
    if (cfg.declare(v) != HMC_SUCCESS)
      HMC_LOG_W("{} plugin '{}': {}", kind_name(rec.kind), rec.name, last_error());
  }
  std::set<std::string> readable;
  for (const auto& v : cfg.declared()) readable.insert(v.name);

  auto& in = *rec.internal;
  const uint32_t abi_min = rec.kind == Kind::Net   ? kNetAbiMin
                           : rec.kind == Kind::Ccl ? kCclAbiMin
                                                   : kDeviceAbiMin;
  const uint32_t abi_max = rec.kind == Kind::Net   ? kNetAbiMax
                           : rec.kind == Kind::Ccl ? kCclAbiMax
                                                   : kDeviceAbiMax;
  in.host =
      std::make_unique<HostServices>(fmt::format("{}/{}", kind_name(rec.kind), rec.name), snapshot_,
                                     std::move(readable), timeout_ms_, abi_min, abi_max);
  // From here the plugin's code may have started threads or registered handlers.
  in.handle.keep_open();

  int st = HMC_PLUGIN_ERR_INTERNAL;
  bool threw = false;
  hmc_net_ctx_t* net_ctx = nullptr;
  hmc_device_ctx_t* device_ctx = nullptr;
  hmc_ccl_ctx_t* ccl_ctx = nullptr;
  in.host->begin_capture();
  try {
    if (rec.kind == Kind::Net)
      st = in.net_table->init(in.host->table(), &net_ctx);
    else if (rec.kind == Kind::Ccl)
      st = in.ccl_table->init(in.host->table(), &ccl_ctx);
    else
      st = in.device_table->init(in.host->table(), &device_ctx);
  } catch (...) {
    threw = true;  // a C++ plugin let an exception cross the C boundary
  }
  in.host->end_capture();

  if (threw) return mark(rec, State::Broken, "init threw a C++ exception across the C boundary");
  if (st == HMC_PLUGIN_ERR_NO_DEVICE) {
    std::string why = in.host->last_message();
    return mark(rec, State::NoDevice,
                "no device: " + (why.empty() ? "the plugin gave no reason" : why));
  }
  if (st == HMC_PLUGIN_ERR_CONFIG) {
    std::string why = in.host->last_problem();
    if (why.empty()) why = "the plugin did not say which variable";
    if (config_error_.empty())
      config_error_ = fmt::format("{} plugin '{}': {}", kind_name(rec.kind), rec.name, why);
    return mark(rec, State::Broken, "invalid configuration: " + why);
  }
  if (st != HMC_PLUGIN_SUCCESS) {
    std::string why = in.host->last_problem();
    return mark(rec, State::Broken,
                "init failed: " + status_text(st) + (why.empty() ? "" : ": " + why));
  }

  std::string problem;
  std::string unavailable;
  int count = 0;
  try {
    if (rec.kind == Kind::Net)
      problem = check_net_devices(in.net_table.get(), net_ctx, &count);
    else if (rec.kind == Kind::Ccl)
      problem = check_ccl_devices(in.ccl_table.get(), ccl_ctx, &count, &unavailable, &rec.library);
    else
      problem = check_device_devices(in.device_table.get(), device_ctx, &count, &unavailable);
  } catch (...) {
    problem = "a C++ exception crossed the C boundary while reading its devices";
  }
  if (!problem.empty()) {
    try {
      if (rec.kind == Kind::Net)
        in.net_table->finalize(net_ctx);
      else if (rec.kind == Kind::Ccl)
        in.ccl_table->finalize(ccl_ctx);
      else
        in.device_table->finalize(device_ctx);
    } catch (...) {
    }
    return mark(rec, State::Broken, problem);
  }

  rec.loaded = true;
  rec.state = State::Loaded;
  rec.device_count = count;
  if (rec.kind != Kind::Net && count == 0)
    rec.reason = "0 devices: " + (unavailable.empty() ? "the plugin gave no reason" : unavailable) +
                 (rec.library.empty() ? "" : " (library: " + rec.library + ")");
  else if (rec.kind == Kind::Ccl)
    rec.reason = fmt::format("{}, {} device{} served",
                             rec.library.empty() ? "library version unknown" : rec.library, count,
                             count == 1 ? "" : "s");
  rec.host = in.host->table();
  if (rec.kind == Kind::Net) {
    rec.net = in.net_table.get();
    rec.net_ctx = net_ctx;
  } else if (rec.kind == Kind::Ccl) {
    rec.ccl = in.ccl_table.get();
    rec.ccl_ctx = ccl_ctx;
  } else {
    rec.device = in.device_table.get();
    rec.device_ctx = device_ctx;
  }
  init_order_.push_back(&rec);
}

void Loader::finalize_all() {
  for (auto it = init_order_.rbegin(); it != init_order_.rend(); ++it) {
    Record& rec = **it;
    if (rec.finalized) continue;
    int st = HMC_PLUGIN_SUCCESS;
    try {
      SignalGuard guard(fmt::format("plugin {}", rec.name), keep_library_signals_);
      st = rec.kind == Kind::Net   ? rec.net->finalize(rec.net_ctx)
           : rec.kind == Kind::Ccl ? rec.ccl->finalize(rec.ccl_ctx)
                                   : rec.device->finalize(rec.device_ctx);
    } catch (...) {
      st = HMC_PLUGIN_ERR_INTERNAL;
    }
    if (st != HMC_PLUGIN_SUCCESS)
      HMC_LOG_W("{} plugin '{}': finalize failed: {}", kind_name(rec.kind), rec.name,
                status_text(st));
    rec.finalized = true;
    rec.host = nullptr;
    rec.net = nullptr;
    rec.net_ctx = nullptr;
    rec.device = nullptr;
    rec.device_ctx = nullptr;
    rec.ccl = nullptr;
    rec.ccl_ctx = nullptr;
  }
  init_order_.clear();
}

std::vector<Record*> Loader::loaded(Kind kind) const {
  std::vector<Record*> out;
  for (const auto& r : records_)
    if (r->kind == kind && r->loaded && !r->finalized) out.push_back(r.get());
  if (selections_) {
    const Selection& sel = selections_->of(kind);
    // Names absent from the list rank after listed ones; stable_sort keeps search order otherwise.
    auto rank = [&](const Record* r) {
      int k = sel.rank(r->name);
      return k < 0 ? std::numeric_limits<int>::max() : k;
    };
    std::stable_sort(out.begin(), out.end(),
                     [&](const Record* a, const Record* b) { return rank(a) < rank(b); });
  }
  return out;
}

const Record* Loader::find(Kind kind, const std::string& name) const {
  for (const auto& r : records_)
    if (r->kind == kind && r->name == name && r->state != State::Shadowed) return r.get();
  return nullptr;
}

void Loader::warn_unknown_selected() const {
  for (Kind kind : {Kind::Device, Kind::Net, Kind::Ccl}) {
    std::vector<std::string> names;
    for (const auto& r : records_)
      if (r->kind == kind && r->internal->claimed) names.push_back(r->name);
    const Selection& sel = selections_->of(kind);
    for (const auto& unknown : sel.unknown_names(names)) {
      if (names.empty())
        HMC_LOG_W("{} names '{}', but no {} plugin was found at all (searched: {})", sel.var(),
                  unknown, kind_name(kind), searched_.empty() ? "nothing" : join(searched_, ", "));
      else
        HMC_LOG_W("{} names '{}', but no {} plugin of that name was found (found: {})", sel.var(),
                  unknown, kind_name(kind), join(names, ", "));
    }
  }
}

void Loader::log_summary() const {
  if (records_.empty()) {
    HMC_LOG_W("plugins: none found (searched: {})",
              searched_.empty() ? "nothing" : join(searched_, ", "));
    return;
  }
  for (const auto& r : records_) {
    const char* kind = kind_name(r->kind);
    switch (r->state) {
      case State::Loaded: {
        std::string devices =
            fmt::format("{} device{}", r->device_count, r->device_count == 1 ? "" : "s");
        if (!r->reason.empty()) devices = r->reason;
        HMC_LOG_I("{} plugin '{}' loaded from {} (version {}, {})", kind, r->name, r->path,
                  r->version.empty() ? "unknown" : r->version, devices);
        break;
      }
      case State::Broken:
        HMC_LOG_W("{} plugin '{}' skipped: {} ({})", kind, r->name, r->reason, r->path);
        break;
      case State::NoDevice:
      case State::NotSelected:
      case State::Shadowed:
        HMC_LOG_I("{} plugin '{}' not used: {} ({})", kind, r->name, r->reason, r->path);
        break;
    }
  }
  auto names = [&](Kind k) {
    std::vector<std::string> n;
    for (const Record* r : loaded(k)) n.push_back(r->name);
    return n.empty() ? std::string("none") : join(n, ", ");
  };
  HMC_LOG_I("plugins in use, in order of preference: device: {}; net: {}; ccl: {}",
            names(Kind::Device), names(Kind::Net), names(Kind::Ccl));
}

}  // namespace hmc::plugin
