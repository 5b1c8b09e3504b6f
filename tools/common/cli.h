// The tools' one option parser (CLI11, Debian: libcli11-dev), set up the same in every tool:
// --opt=value and --opt value, -n5 and -n 5, --help and --version, and one exit status for bad
// arguments (2) with the parser's message and a pointer to --help. Also the checks that recur
// across tools: a word of a list, a whole number in a range, a size (size.h), and --timeout, the
// bound of a single wait in milliseconds everywhere (as HMC_TIMEOUT_MS).
#pragma once

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "size.h"

namespace hmc_tools {

// Adds --version to app. Call before parse().
inline void add_version(CLI::App& app, const std::string& tool, const std::string& version) {
  app.set_version_flag("--version", tool + " (hmc) " + version, "print the version and exit");
}

// What parsing found.
enum class Parsed { Run, Help, Version, Bad };

// Parses argv into app and prints nothing: Run to go on; Help or Version when asked (*text: the
// version line); Bad with the parser's message in *text. For tools whose parsing is tested
// without running them.
inline Parsed parse_quietly(CLI::App& app, int argc, const char* const* argv, std::string* text) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    return Parsed::Help;
  } catch (const CLI::CallForAllHelp&) {
    return Parsed::Help;
  } catch (const CLI::CallForVersion& e) {
    *text = e.what();
    return Parsed::Version;
  } catch (const CLI::ParseError& e) {
    *text = e.what();
    return Parsed::Bad;
  }
  return Parsed::Run;
}

// Prints what parse_quietly found and returns the exit status (-1 to go on): 0 after the help
// text or the version line on stdout, 2 after the message and "run with --help" on stderr.
inline int report(const std::string& tool, Parsed parsed, const std::string& text,
                  const std::string& help) {
  switch (parsed) {
    case Parsed::Run: return -1;
    case Parsed::Help: std::fputs(help.c_str(), stdout); return 0;
    case Parsed::Version: std::printf("%s\n", text.c_str()); return 0;
    case Parsed::Bad: break;
  }
  std::fprintf(stderr, "%s: %s\nrun '%s --help' for the options\n", tool.c_str(), text.c_str(),
               tool.c_str());
  return 2;
}

// Parses argv into app. Returns -1 to go on, else the exit status: 0 after --help or --version
// (printed), 2 after a bad argument (the message and "run with --help" on stderr).
inline int parse(CLI::App& app, int argc, char** argv) {
  std::string text;
  const Parsed parsed = parse_quietly(app, argc, argv, &text);
  return report(app.get_name(), parsed, text, parsed == Parsed::Help ? app.help() : "");
}

// Accepts one of words; refuses anything else with "wants a, b or c, got 'x'".
inline CLI::Validator one_of(std::vector<std::string> words) {
  std::string wants;
  for (size_t i = 0; i < words.size(); ++i)
    wants += (i == 0 ? "" : i + 1 == words.size() ? " or " : ", ") + words[i];
  return CLI::Validator(
      [words, wants](std::string& v) -> std::string {
        for (const std::string& w : words)
          if (v == w) return "";
        return "wants " + wants + ", got '" + v + "'";
      },
      wants);
}

// Parses a whole number lo..hi (decimal, nothing after it) into *out.
inline bool parse_whole(const std::string& text, int64_t lo, int64_t hi, int64_t* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// Accepts a whole number lo..hi; refuses anything else with "wants <what> lo..hi, got 'x'".
inline CLI::Validator whole_in(int64_t lo, int64_t hi, const std::string& what) {
  const std::string wants = what + " " + std::to_string(lo) + ".." + std::to_string(hi);
  return CLI::Validator(
      [lo, hi, wants](std::string& v) -> std::string {
        int64_t n = 0;
        return parse_whole(v, lo, hi, &n) ? "" : "wants " + wants + ", got '" + v + "'";
      },
      "N");
}

// Rewrites a size (size.h: 64K, 4M, 1.5G) into its bytes, refusing one under min or not a size.
// Use as add_option(...)->transform(size_at_least(1)) on an integer.
inline CLI::Validator size_at_least(uint64_t min) {
  return CLI::Validator(
      [min](std::string& v) -> std::string {
        uint64_t bytes = 0;
        if (!parse_size(v, &bytes) || bytes < min)
          return "wants a size" + (min > 0 ? " >= " + std::to_string(min) : std::string()) +
                 ", got '" + v + "' (expected a size such as 4096, 64K, 1.5M or 1G; powers of " +
                 "1024)";
        v = std::to_string(bytes);
        return "";
      },
      "SIZE");
}

// Adds --timeout MS, the bound of every single wait (connect, a transfer, a step), in
// milliseconds as HMC_TIMEOUT_MS, lo..hi; *ms keeps its value when not given.
inline CLI::Option* add_timeout(CLI::App& app, int* ms, int lo, int hi, const std::string& what) {
  return app
      .add_option("--timeout", *ms,
                  what + ", in milliseconds (default " + std::to_string(*ms) + ")")
      ->type_name("MS")
      ->check(whole_in(lo, hi, "milliseconds"));
}

}  // namespace hmc_tools
