// The configuration tables as Markdown: one table (variable, default, meaning) per owner, the
// core first, in the order the variables were declared. Printed by `hmc-info --config --format
// markdown` and by tests/docs/config_doc_gen, which writes the tables of docs/configuration.md;
// one printer, so that the two cannot disagree on the layout.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace hmc_info {

struct ConfigDocEntry {
  std::string name;
  std::string default_value;
  std::string help;
  std::string section;  // "core", or the plugin's folder name: "net-hoststage", "device-cuda"
};

// Text for a table cell: characters that Markdown would read as markup are escaped.
inline std::string markdown_cell(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '|': o += "\\|"; break;
      case '\\': o += "\\\\"; break;
      case '*': o += "\\*"; break;
      case '`': o += "\\`"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '\n': o += ' '; break;
      default: o.push_back(c);
    }
  }
  return o;
}

// Sections appear in the order of their first entry; entries keep their order within a section.
inline void print_config_markdown(const std::vector<ConfigDocEntry>& entries, FILE* out) {
  std::vector<std::string> sections;
  for (const auto& e : entries) {
    bool seen = false;
    for (const auto& s : sections) seen = seen || s == e.section;
    if (!seen) sections.push_back(e.section);
  }
  bool first = true;
  for (const auto& section : sections) {
    std::fprintf(out, "%s### %s\n\n", first ? "" : "\n", section.c_str());
    first = false;
    std::fprintf(out, "| variable | default | meaning |\n|---|---|---|\n");
    for (const auto& e : entries) {
      if (e.section != section) continue;
      std::string def = e.default_value.empty() ? "(empty)" : "`" + e.default_value + "`";
      std::fprintf(out, "| `%s` | %s | %s |\n", e.name.c_str(), def.c_str(),
                   markdown_cell(e.help).c_str());
    }
  }
}

}  // namespace hmc_info
