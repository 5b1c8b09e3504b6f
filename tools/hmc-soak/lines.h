// The launcher and its workers talk in JSON objects, one a line, over pipes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace soak {

// Writes one object as a line; false when the other end is gone.
bool write_line(int fd, const nlohmann::json& j);

// Reads lines from one descriptor, buffering what follows the last newline.
class LineReader {
 public:
  explicit LineReader(int fd) : fd_(fd) {}
  // 1: *out has a line; 0: none within timeout_ms; -1: the other end closed (or a read failed).
  int read(int timeout_ms, nlohmann::json* out);
  // Reads what is there without waiting; false at end of file. Whole lines go to take().
  bool pump();
  bool take(nlohmann::json* out);
  int fd() const { return fd_; }

 private:
  int fd_;
  std::string buf_;
  bool eof_ = false;
};

}  // namespace soak
