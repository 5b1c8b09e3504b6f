#include "lines.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

namespace soak {

bool write_line(int fd, const nlohmann::json& j) {
  std::string s = j.dump() + "\n";
  size_t done = 0;
  while (done < s.size()) {
    ssize_t w = ::write(fd, s.data() + done, s.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    done += size_t(w);
  }
  return true;
}

bool LineReader::pump() {
  char tmp[65536];
  for (;;) {
    ssize_t r = ::read(fd_, tmp, sizeof tmp);
    if (r > 0) {
      buf_.append(tmp, size_t(r));
      if (size_t(r) < sizeof tmp) return true;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    eof_ = true;
    return false;
  }
}

bool LineReader::take(nlohmann::json* out) {
  for (;;) {
    size_t nl = buf_.find('\n');
    if (nl == std::string::npos) return false;
    std::string line = buf_.substr(0, nl);
    buf_.erase(0, nl + 1);
    if (line.empty()) continue;
    *out = nlohmann::json::parse(line, nullptr, false);
    if (!out->is_discarded()) return true;
  }
}

int LineReader::read(int timeout_ms, nlohmann::json* out) {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (take(out)) return 1;
    if (eof_) return -1;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    until - std::chrono::steady_clock::now())
                    .count();
    if (left < 0) return 0;
    pollfd p{fd_, POLLIN, 0};
    int r = ::poll(&p, 1, int(left));
    if (r < 0 && errno != EINTR) return -1;
    if (r > 0 && !pump() && !take(out)) return -1;
  }
}

}  // namespace soak
