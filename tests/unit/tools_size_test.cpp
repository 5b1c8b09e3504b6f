// The tools' one size parser (tools/common/size.h) and the shared checks of their option parser
// (tools/common/cli.h): what every tool's -b, --size, --max-size and --timeout take.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "../../tools/common/cli.h"
#include "../../tools/common/size.h"

namespace {

using hmc_tools::parse_size;
using hmc_tools::size_text;

TEST(ToolsSize, UnitsArePowersOf1024) {
  const std::pair<const char*, uint64_t> good[] = {
      {"0", 0},
      {"8", 8},
      {"4096", 4096},
      {"4096B", 4096},
      {"64K", 64u << 10},
      {"64k", 64u << 10},
      {"2KiB", 2048},
      {"4M", 4u << 20},
      {"4m", 4u << 20},
      {"3MiB", 3u << 20},
      {"1G", 1u << 30},
      {"1g", 1u << 30},
      {"2GiB", 2ull << 30},
      {"128M", 128u << 20},
      {"16777216G", 1ull << 54},
      {"18446744073709551615", UINT64_MAX},
  };
  for (const auto& [text, want] : good) {
    uint64_t v = 1;
    ASSERT_TRUE(parse_size(text, &v)) << text;
    EXPECT_EQ(v, want) << text;
  }
}

TEST(ToolsSize, FractionsThatComeOutWhole) {
  const std::pair<const char*, uint64_t> good[] = {
      {"1.5K", 1536}, {"0.5M", 512u << 10}, {"0.25G", 256u << 20}, {"2.0", 2}, {"1.000K", 1024}};
  for (const auto& [text, want] : good) {
    uint64_t v = 0;
    ASSERT_TRUE(parse_size(text, &v)) << text;
    EXPECT_EQ(v, want) << text;
  }
  uint64_t v = 7;
  for (const char* part_of_a_byte : {"1.5", "0.1K", "1.0001K", "0.3"}) {
    EXPECT_FALSE(parse_size(part_of_a_byte, &v)) << part_of_a_byte;
    EXPECT_EQ(v, 7u) << "touched by " << part_of_a_byte;
  }
}

TEST(ToolsSize, RefusesGarbageSignsAndOverflow) {
  uint64_t v = 0;
  for (const char* bad :
       {"", "-1", "+4", " 4", "4 ", "4X", "K", "4MM", "4KB", "4kib", "1.", ".5K", "1..5", "0x10",
        "18446744073709551616", "99999999999999999999", "17179869184G", "18446744073709551615.5K"})
    EXPECT_FALSE(parse_size(bad, &v)) << bad;
}

TEST(ToolsSize, TextRoundTrips) {
  EXPECT_EQ(size_text(0), "0");
  EXPECT_EQ(size_text(8), "8");
  EXPECT_EQ(size_text(1500), "1500");
  EXPECT_EQ(size_text(4096), "4K");
  EXPECT_EQ(size_text(4u << 20), "4M");
  EXPECT_EQ(size_text(1u << 30), "1G");
  EXPECT_EQ(size_text(3ull << 40), "3072G");
  for (uint64_t n : {uint64_t{1}, uint64_t{1536}, uint64_t{64} << 20, uint64_t{5} << 30}) {
    uint64_t back = 0;
    ASSERT_TRUE(parse_size(size_text(n), &back)) << n;
    EXPECT_EQ(back, n);
  }
}

// Runs a CLI11 app over args (the program name first); the parse status and its message.
std::pair<hmc_tools::Parsed, std::string> run(CLI::App& app, std::vector<const char*> args) {
  args.insert(args.begin(), "tool");
  std::string text;
  auto p = hmc_tools::parse_quietly(app, static_cast<int>(args.size()), args.data(), &text);
  return {p, text};
}

TEST(ToolsCli, SizeOptionTakesTheSameForms) {
  const std::vector<std::pair<std::vector<const char*>, uint64_t>> forms = {
      {{"-b8"}, 8},
      {{"-b", "64K"}, 64u << 10},
      {{"--bytes=1.5M"}, 3u << 19},
      {{"--bytes", "2KiB"}, 2048}};
  for (const auto& [args, want] : forms) {
    CLI::App app;
    uint64_t bytes = 0;
    app.add_option("-b,--bytes", bytes)->transform(hmc_tools::size_at_least(1));
    auto [parsed, text] = run(app, args);
    ASSERT_EQ(parsed, hmc_tools::Parsed::Run) << args[0] << ": " << text;
    EXPECT_EQ(bytes, want) << args[0];
  }
  CLI::App app;
  uint64_t bytes = 0;
  app.add_option("-b", bytes)->transform(hmc_tools::size_at_least(64));
  auto [parsed, text] = run(app, {"-b", "32"});
  EXPECT_EQ(parsed, hmc_tools::Parsed::Bad);
  EXPECT_NE(text.find("wants a size >= 64"), std::string::npos) << text;
  EXPECT_NE(text.find("'32'"), std::string::npos) << text;
}

TEST(ToolsCli, TimeoutIsMillisecondsEverywhere) {
  CLI::App app;
  int ms = 2000;
  hmc_tools::add_timeout(app, &ms, 100, 600000, "the bound of one wait");
  EXPECT_NE(app.help().find("in milliseconds (default 2000)"), std::string::npos) << app.help();
  EXPECT_EQ(run(app, {}).first, hmc_tools::Parsed::Run);
  EXPECT_EQ(ms, 2000);
  EXPECT_EQ(run(app, {"--timeout=750"}).first, hmc_tools::Parsed::Run);
  EXPECT_EQ(ms, 750);
  for (const char* bad : {"10", "1s", "0.5", "600001"}) {
    CLI::App again;
    hmc_tools::add_timeout(again, &ms, 100, 600000, "the bound of one wait");
    auto [parsed, text] = run(again, {"--timeout", bad});
    EXPECT_EQ(parsed, hmc_tools::Parsed::Bad) << bad;
    EXPECT_NE(text.find("--timeout: wants milliseconds 100..600000"), std::string::npos) << text;
  }
}

TEST(ToolsCli, WordsAndWholeNumbers) {
  CLI::App app;
  std::string format;
  int64_t n = 0;
  app.add_option("--format", format)->check(hmc_tools::one_of({"table", "json", "csv"}));
  app.add_option("-n", n)->check(hmc_tools::whole_in(1, 9, "a count"));
  auto [parsed, text] = run(app, {"--format=yaml"});
  EXPECT_EQ(parsed, hmc_tools::Parsed::Bad);
  EXPECT_EQ(text, "--format: wants table, json or csv, got 'yaml'");
  CLI::App app2;
  app2.add_option("-n", n)->check(hmc_tools::whole_in(1, 9, "a count"));
  auto [parsed2, text2] = run(app2, {"-n10"});
  EXPECT_EQ(parsed2, hmc_tools::Parsed::Bad);
  EXPECT_EQ(text2, "-n: wants a count 1..9, got '10'");
  CLI::App app3;
  app3.add_option("-n", n)->check(hmc_tools::whole_in(1, 9, "a count"));
  EXPECT_EQ(run(app3, {"-n5"}).first, hmc_tools::Parsed::Run);
  EXPECT_EQ(n, 5);
}

TEST(ToolsCli, HelpVersionAndStrays) {
  CLI::App app("about", "tool");
  hmc_tools::add_version(app, "tool", "9.8.7");
  EXPECT_EQ(run(app, {"--help"}).first, hmc_tools::Parsed::Help);
  auto [parsed, text] = run(app, {"--version"});
  EXPECT_EQ(parsed, hmc_tools::Parsed::Version);
  EXPECT_EQ(text, "tool (hmc) 9.8.7");
  auto [bad, why] = run(app, {"stray"});
  EXPECT_EQ(bad, hmc_tools::Parsed::Bad);
  EXPECT_NE(why.find("stray"), std::string::npos) << why;
}

}  // namespace
