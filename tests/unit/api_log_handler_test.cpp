// hmc_log_set_handler: the lines HMC_LOG_LEVEL lets through reach the application's handler,
// with their level and without the file's prefix; NULL restores the default destination; and
// setting a handler waits for the calls of the previous one.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hmc/hmc.h"

namespace {

struct Lines {
  std::mutex mutex;
  std::vector<std::pair<int, std::string>> got;
};

void collect(int level, const char* line, void* user) {
  auto* lines = static_cast<Lines*>(user);
  std::lock_guard<std::mutex> lock(lines->mutex);
  lines->got.emplace_back(level, line);
}

// Creates and destroys a context, which logs "context ... ready" at info level.
void make_context() {
  hmc_context_options_t o{};
  o.struct_size = sizeof o;
  o.progress_thread = 0;
  hmc_context_t ctx = nullptr;
  ASSERT_EQ(hmc_context_create(&o, &ctx), HMC_SUCCESS) << hmc_last_error();
  EXPECT_EQ(hmc_context_destroy(ctx), HMC_SUCCESS);
}

class ApiLogHandler : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("HMC_PLUGIN_PATH", HMC_TEST_PLUGIN_DIR, 1);
    setenv("HMC_LOG_LEVEL", "info", 1);
  }
  void TearDown() override {
    EXPECT_EQ(hmc_log_set_handler(nullptr, nullptr), HMC_SUCCESS);
    unsetenv("HMC_LOG_LEVEL");
    unsetenv("HMC_LOG_FILE");
    unsetenv("HMC_PLUGIN_PATH");
  }
};

TEST_F(ApiLogHandler, LinesArriveWithTheirLevelAndWithoutThePrefix) {
  Lines lines;
  ASSERT_EQ(hmc_log_set_handler(collect, &lines), HMC_SUCCESS);
  make_context();
  ASSERT_EQ(hmc_log_set_handler(nullptr, nullptr), HMC_SUCCESS);
  bool ready = false;
  for (const auto& [level, line] : lines.got) {
    EXPECT_GE(level, 1);
    EXPECT_LE(level, 3) << line;  // HMC_LOG_LEVEL=info: nothing of debug or trace
    EXPECT_NE(line.rfind("[hmc ", 0), 0u) << line;
    EXPECT_TRUE(line.empty() || line.back() != '\n') << line;
    if (line.find("ready: control plane") != std::string::npos) {
      EXPECT_EQ(level, 3);
      ready = true;
    }
  }
  EXPECT_TRUE(ready) << lines.got.size() << " lines, none saying the context is ready";
}

TEST_F(ApiLogHandler, NullRestoresTheLogFile) {
  char path[] = "/tmp/hmc_log_handler_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  setenv("HMC_LOG_FILE", path, 1);
  Lines lines;
  ASSERT_EQ(hmc_log_set_handler(collect, &lines), HMC_SUCCESS);
  ASSERT_EQ(hmc_log_set_handler(nullptr, nullptr), HMC_SUCCESS);
  make_context();
  EXPECT_TRUE(lines.got.empty()) << lines.got.size() << " lines reached a handler set back";
  setenv("HMC_LOG_FILE", "stderr", 1);
  make_context();  // closes the file
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  unlink(path);
  EXPECT_NE(text.str().find("] INFO  context "), std::string::npos) << text.str();
}

TEST_F(ApiLogHandler, SettingWaitsForTheRunningCallsOfThePrevious) {
  struct Slow {
    std::atomic<int> running{0};
    std::atomic<int> calls{0};
  } slow;
  auto handler = [](int, const char*, void* user) {
    auto* s = static_cast<Slow*>(user);
    ++s->running;
    ++s->calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    --s->running;
  };
  ASSERT_EQ(hmc_log_set_handler(handler, &slow), HMC_SUCCESS);
  std::thread logger([] { make_context(); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (slow.calls.load() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_GT(slow.calls.load(), 0) << "no line within 10 s";
  ASSERT_EQ(hmc_log_set_handler(nullptr, nullptr), HMC_SUCCESS);
  EXPECT_EQ(slow.running.load(), 0);  // none still running once it returned...
  const int calls = slow.calls.load();
  logger.join();
  EXPECT_EQ(slow.calls.load(), calls);  // ...and none started after
}

}  // namespace
