// The tools' one option parser (CLI11, Debian: libcli11-dev), set up the same in every tool:
// --opt=value and --opt value, -n5 and -n 5, --help and --version, and one exit status for bad
// arguments (2) with the parser's message and a pointer to --help.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

namespace hmc_tools {

// Adds --version to app. Call before parse().
inline void add_version(CLI::App& app, const std::string& tool, const std::string& version) {
  app.set_version_flag("--version", tool + " (hmc) " + version, "print the version and exit");
}

// Parses argv into app. Returns -1 to go on, else the exit status: 0 after --help or --version
// (printed), 2 after a bad argument (the message and "run with --help" on stderr).
inline int parse(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::CallForVersion& e) {
    std::printf("%s\n", e.what());
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s\nrun '%s --help' for the options\n", app.get_name().c_str(),
                 e.what(), app.get_name().c_str());
    return 2;
  }
  return -1;
}

}  // namespace hmc_tools
