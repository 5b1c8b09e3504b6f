// hmc's log lines into Python's logging (hmc.route_logging_to_python). hmc calls its log handler
// from any thread, often with its own locks held, so the handler never takes the GIL: it queues
// the line, and a thread of this module, which holds no hmc lock, takes the GIL and hands the
// lines to logging.getLogger("hmc"). Stopping (explicitly, or at interpreter exit through
// atexit, before finalization) restores hmc's own destination first, then lets the thread
// deliver what is queued and end, so no thread of ours touches Python once it is finalizing.
#include <hmc/hmc.h>
#include <pybind11/pybind11.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "objects.h"

namespace py = pybind11;

namespace hmcpy {
namespace {

constexpr size_t kQueueMax = 10000;  // lines waiting; beyond, lines are counted and dropped
constexpr auto kStopWait = std::chrono::seconds(10);

// logging's level of an hmc level (1 error .. 5 trace; trace has no name in logging: 5).
int python_level(int level) {
  switch (level) {
    case 1: return 40;
    case 2: return 30;
    case 3: return 20;
    case 4: return 10;
    default: return 5;
  }
}

struct Forwarder {
  std::mutex mutex;
  std::condition_variable wake;     // lines queued, or stop asked
  std::condition_variable stopped;  // the thread ended
  std::deque<std::pair<int, std::string>> lines;
  size_t dropped = 0;
  bool running = false;  // the thread runs (or was detached after kStopWait)
  bool stop = false;
  bool ended = true;
  PyObject* logger = nullptr;  // logging.getLogger("hmc"), a reference; the GIL guards it
};

// Never destroyed: the handler may be called until hmc_log_set_handler(NULL) returns, and a
// detached thread may still look at it.
Forwarder& forwarder() {
  static Forwarder* f = new Forwarder();
  return *f;
}

void handler(int level, const char* line, void* user) {
  auto* f = static_cast<Forwarder*>(user);
  {
    std::lock_guard<std::mutex> lock(f->mutex);
    if (f->lines.size() >= kQueueMax) {
      ++f->dropped;
      return;
    }
    f->lines.emplace_back(level, line);
  }
  f->wake.notify_one();
}

// Hands a batch to the logger; the GIL is held. A failing logging handler is reported as
// unraisable and does not stop the forwarding.
void deliver(Forwarder& f, std::deque<std::pair<int, std::string>>& batch, size_t dropped) {
  py::handle logger(f.logger);
  for (auto& [level, text] : batch) {
    try {
      logger.attr("log")(python_level(level), py::str(text));
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("hmc's log forwarding");
    }
  }
  if (dropped) {
    try {
      logger.attr("warning")(std::to_string(dropped) +
                             " hmc log line(s) were dropped: logging did not keep up");
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("hmc's log forwarding");
    }
  }
}

void run(Forwarder* f) {
  std::unique_lock<std::mutex> lock(f->mutex);
  for (;;) {
    f->wake.wait(lock, [&] { return f->stop || !f->lines.empty() || f->dropped; });
    if (f->lines.empty() && !f->dropped) break;  // stop, and nothing left
    std::deque<std::pair<int, std::string>> batch;
    batch.swap(f->lines);
    const size_t dropped = std::exchange(f->dropped, 0);
    lock.unlock();
    if (finalizing()) {  // too late for Python (the exit did not stop us): the lines go
      lock.lock();
      break;
    }
    {
      py::gil_scoped_acquire gil;
      deliver(*f, batch, dropped);
    }
    lock.lock();
  }
  f->ended = true;
  f->stopped.notify_all();
}

void start() {
  Forwarder& f = forwarder();
  {
    std::lock_guard<std::mutex> lock(f.mutex);
    if (f.running) return;
  }
  py::object logger = py::module_::import("logging").attr("getLogger")("hmc");
  Py_XDECREF(f.logger);
  f.logger = logger.release().ptr();
  {
    std::lock_guard<std::mutex> lock(f.mutex);
    f.running = true;
    f.stop = false;
    f.ended = false;
  }
  std::thread(run, &f).detach();  // ended (and waited for) by stop()
  (void)hmc_log_set_handler(handler, &f);
}

void stop() {
  Forwarder& f = forwarder();
  {
    std::lock_guard<std::mutex> lock(f.mutex);
    if (!f.running) return;
  }
  (void)hmc_log_set_handler(nullptr, nullptr);  // no call of ours runs once it returned
  bool ended;
  {
    py::gil_scoped_release released;  // the thread delivers what is queued with the GIL
    std::unique_lock<std::mutex> lock(f.mutex);
    f.stop = true;
    f.wake.notify_one();
    ended = f.stopped.wait_for(lock, kStopWait, [&] { return f.ended; });
    f.running = !ended;
  }
  if (!ended) {
    // A logging handler that does not return: the thread is left to it (it stays running).
    std::fprintf(stderr, "hmc: the log forwarding thread did not end within %lld s\n",
                 static_cast<long long>(kStopWait.count()));
    return;
  }
  Py_CLEAR(f.logger);
}

}  // namespace

void bind_log_forwarding(py::module_& m) {
  m.def(
      "_route_logging",
      [](bool enabled) {
        if (enabled)
          start();
        else
          stop();
      },
      "Starts (True) or stops (False) handing hmc's log lines to logging.getLogger('hmc').");
}

}  // namespace hmcpy
