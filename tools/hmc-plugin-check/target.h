// What the checker is asked to check, and how it has the core's loader load it: plugin files
// (path/to/libhmc-net-foo.so) alone, or plugins named KIND:NAME found as the core finds them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "plugin/loader.h"

namespace hmc::check {

struct Target {
  std::string arg;                            // as given
  bool file = true;                           // a plugin file, not KIND:NAME
  std::string path;                           // the file's realpath
  plugin::Kind kind = plugin::Kind::Unknown;  // KIND:NAME only
  std::string name;                           // KIND:NAME only
};

// Parses one operand. False, with *why, for a KIND:NAME of unknown kind or a file that is not
// there.
bool parse_target(const std::string& arg, Target* out, std::string* why);

// Loads the targets as the core would, in one loader: files through HMC_PLUGIN_PATH alone (no
// default directory, no selection variable), or named plugins through the environment's search
// path (and the default directory unless default_dirs is false), with the selection variables
// of the kinds named set to those names. The targets are all files or all named.
std::unique_ptr<plugin::Loader> load_targets(const std::vector<Target>& targets, bool default_dirs);

// The loader's record of a target, or nullptr when the loader did not find it.
const plugin::Record* find_record(const plugin::Loader& loader, const Target& target);

}  // namespace hmc::check
