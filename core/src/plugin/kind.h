// The three plugin kinds, and the names the loader, the log and the selection variables use for
// them.
#pragma once

namespace hmc::plugin {

// Unknown only for a broken file whose kind could not be told: neither its file name follows
// libhmc-<kind>-<name>.so nor does it export an entry symbol.
enum class Kind { Device, Net, Ccl, Unknown };

// "device", "net", "ccl", "unknown".
const char* kind_name(Kind kind);
// The selection variable of a kind: "HMC_DEVICE_PLUGINS", "HMC_NET_PLUGINS",
// "HMC_CCL_PLUGINS".
const char* selection_var(Kind kind);

}  // namespace hmc::plugin
