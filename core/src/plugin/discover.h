// Where plugins are looked for, and which files count as plugins. No file is opened here.
//
// Search order: the entries of HMC_PLUGIN_PATH (colon-separated; a directory is scanned for
// libhmc-device-*.so, libhmc-net-*.so and libhmc-ccl-*.so, sorted by file name; a file is taken as
// a plugin whatever its name), then the default directory: hmc/ beside the shared object (or
// executable) that contains the core, or, when that does not exist, ../lib/hmc relative to it
// (executables in build/bin that link the core statically find build/lib/hmc). A file reached twice
// (same realpath) is listed once.
#pragma once

#include <string>
#include <vector>

#include "plugin/kind.h"

namespace hmc::plugin {

struct Candidate {
  std::string path;           // realpath
  bool conventional = false;  // the file name is libhmc-<kind>-<name>.so
  Kind kind = Kind::Unknown;  // from the file name when conventional
  std::string name;           // from the file name when conventional, else empty
  std::string origin;         // "HMC_PLUGIN_PATH" or "default directory <dir>"
};

// Parses "libhmc-net-hoststage.so" into (Net, "hoststage"). False for any other shape.
bool parse_plugin_file_name(const std::string& base_name, Kind* kind, std::string* name);

// The realpath of the object (shared library or executable) containing the core's code.
std::string core_object_path();
// The default plugin directories that exist (zero or one entry, realpath'd).
std::vector<std::string> default_plugin_dirs();

struct Discovery {
  std::vector<Candidate> candidates;
  std::vector<std::string> searched;  // every directory or file looked at, in order
  std::vector<std::string> problems;  // HMC_PLUGIN_PATH entries that were unusable, as messages
};

// plugin_path: the value of HMC_PLUGIN_PATH ("" when unset).
Discovery discover(const std::string& plugin_path, bool search_default_dirs);

}  // namespace hmc::plugin
