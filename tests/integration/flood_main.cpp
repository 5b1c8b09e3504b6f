// hmc-test-flood: bad connectors for a context's control plane (tests/integration/flood_test.cpp).
// Plain sockets, no hmc: what a port scanner, a stray client or a hostile one would do.
//
//   hmc-test-flood <tcp:HOST:PORT | unix:NAME> [key=value ...]
//     silent=N       connect and send nothing, held open
//     random=N       send 64 random bytes, held open
//     bad-version=N  send a well-formed frame header with frame version 99, held open
//     close=N        connect and close at once
//     slow=N         send a valid Hello one byte per slow-ms, held open
//     slow-ms=N      (1000)
//     hold-ms=N      how long to keep it all up (5000); while it lasts, every random,
//                    bad-version and close connector the listener has dropped is made again
//     token=0|1      the Hello's token flag
//
// Prints "flood up: N connections" once every kind is connected, and at the end
// "flood done: N connections made (M connects refused)": every successful connect, repeats
// included, and those that failed or took longer than 200 ms (a full backlog; the listener may
// still have taken some of those).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const std::string& what) {
  fprintf(stderr, "hmc-test-flood: %s\n", what.c_str());
  exit(1);
}

struct Target {
  bool unix_socket = false;
  std::string host;  // tcp
  uint16_t port = 0;
  std::string name;  // unix (abstract)
};

// How long one connect may block: a listener whose backlog is full must slow the flood down, not
// stop it (a TCP connect would otherwise retry its SYN for seconds).
constexpr int kConnectTimeoutMs = 200;

// A socket with its connect bounded by SO_SNDTIMEO (Linux applies it to connect).
int bounded_socket(int family) {
  int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{0, kConnectTimeoutMs * 1000};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

// A connected, then non-blocking, socket; -1 when the connect failed or timed out.
int dial(const Target& t) {
  int fd;
  if (t.unix_socket) {
    fd = bounded_socket(AF_UNIX);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path + 1, t.name.data(), t.name.size());
    socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + t.name.size());
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), len) != 0) {
      close(fd);
      return -1;
    }
  } else {
    fd = bounded_socket(AF_INET);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(t.port);
    if (inet_pton(AF_INET, t.host.c_str(), &a.sin_addr) != 1) die("bad IPv4 address " + t.host);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      close(fd);
      return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  timeval none{0, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof none);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

void put_u16(std::vector<uint8_t>* b, uint16_t v) {
  b->push_back(static_cast<uint8_t>(v));
  b->push_back(static_cast<uint8_t>(v >> 8));
}
void put_u32(std::vector<uint8_t>* b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b->push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_str(std::vector<uint8_t>* b, const std::string& s) {
  put_u32(b, static_cast<uint32_t>(s.size()));
  b->insert(b->end(), s.begin(), s.end());
}

// A frame header as docs/protocols.md has it: magic "HMC1", frame version, type, length.
std::vector<uint8_t> frame_header(uint16_t version, uint16_t type, uint32_t len) {
  std::vector<uint8_t> b;
  put_u32(&b, 0x31434D48u);
  put_u16(&b, version);
  put_u16(&b, type);
  put_u32(&b, len);
  return b;
}

// A valid Hello frame (protocol version 1; see control/handshake.h for the layout).
std::vector<uint8_t> hello_frame(bool token) {
  std::vector<uint8_t> p;
  put_u16(&p, 1);
  put_u16(&p, 1);
  p.push_back(token ? 1 : 0);
  for (int i = 0; i < 32; ++i) p.push_back(static_cast<uint8_t>(i));
  put_str(&p, "flood-host/boot");
  put_str(&p, "flood-host");
  put_u32(&p, static_cast<uint32_t>(getpid()));
  for (int i = 0; i < 8; ++i) p.push_back(0);
  std::vector<uint8_t> f = frame_header(1, 1, static_cast<uint32_t>(p.size()));
  f.insert(f.end(), p.begin(), p.end());
  return f;
}

enum class Kind { Silent, Random, BadVersion, Close, Slow };

struct Conn {
  Kind kind;
  int fd = -1;
  size_t sent = 0;  // slow: bytes of the Hello sent
};

bool send_all(int fd, const std::vector<uint8_t>& b) {
  return send(fd, b.data(), b.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(b.size());
}

// Opens one connector of its kind; false when the connect failed (the listener's backlog).
bool open_conn(const Target& t, Conn* c, const std::vector<uint8_t>& bad_version, uint64_t* made) {
  c->fd = dial(t);
  if (c->fd < 0) return false;
  ++*made;
  switch (c->kind) {
    case Kind::Silent:
    case Kind::Slow: break;
    case Kind::Random: {
      uint8_t junk[64];
      if (getrandom(junk, sizeof junk, 0) != sizeof junk) die("getrandom failed");
      junk[0] = 'X';  // never the first byte of the frame magic, whatever the rest says
      (void)send(c->fd, junk, sizeof junk, MSG_NOSIGNAL);
      break;
    }
    case Kind::BadVersion: (void)send_all(c->fd, bad_version); break;
    case Kind::Close:
      close(c->fd);
      c->fd = -1;
      break;
  }
  return true;
}

// True when the listener closed the connection (EOF or reset).
bool closed_by_listener(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  char buf[256];
  ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) die("usage: hmc-test-flood <tcp:HOST:PORT|unix:NAME> [key=value ...]");
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  signal(SIGPIPE, SIG_IGN);
  std::map<std::string, long> arg{{"silent", 0},     {"random", 0}, {"bad-version", 0},
                                  {"close", 0},      {"slow", 0},   {"slow-ms", 1000},
                                  {"hold-ms", 5000}, {"token", 0}};
  for (int i = 2; i < argc; ++i) {
    const char* eq = strchr(argv[i], '=');
    if (!eq || !arg.count(std::string(argv[i], eq - argv[i])))
      die(std::string("bad argument '") + argv[i] + "'");
    arg[std::string(argv[i], eq - argv[i])] = strtol(eq + 1, nullptr, 10);
  }
  Target t;
  std::string where = argv[1];
  if (where.rfind("unix:", 0) == 0) {
    t.unix_socket = true;
    t.name = where.substr(5);
  } else if (where.rfind("tcp:", 0) == 0) {
    size_t colon = where.rfind(':');
    t.host = where.substr(4, colon - 4);
    t.port = static_cast<uint16_t>(strtol(where.c_str() + colon + 1, nullptr, 10));
  } else {
    die("bad target " + where);
  }

  const std::vector<uint8_t> bad_version = frame_header(99, 1, 0);
  const std::vector<uint8_t> hello = hello_frame(arg["token"] != 0);
  std::vector<Conn> conns;
  // Interleaved, so that every kind is in the listener's queue at once.
  const long most =
      std::max({arg["silent"], arg["random"], arg["bad-version"], arg["close"], arg["slow"]});
  for (long i = 0; i < most; ++i) {
    if (i < arg["silent"]) conns.push_back({Kind::Silent});
    if (i < arg["random"]) conns.push_back({Kind::Random});
    if (i < arg["bad-version"]) conns.push_back({Kind::BadVersion});
    if (i < arg["close"]) conns.push_back({Kind::Close});
    if (i < arg["slow"]) conns.push_back({Kind::Slow});
  }
  uint64_t made = 0, refused = 0;
  for (auto& c : conns)
    if (!open_conn(t, &c, bad_version, &made)) ++refused;
  printf("flood up: %llu connections (%llu connects refused)\n",
         static_cast<unsigned long long>(made), static_cast<unsigned long long>(refused));
  fflush(stdout);

  const auto start = Clock::now();
  auto next_slow = start;
  while (Clock::now() - start < std::chrono::milliseconds(arg["hold-ms"])) {
    const auto now = Clock::now();
    const bool slow_tick = now >= next_slow;
    if (slow_tick) next_slow = now + std::chrono::milliseconds(arg["slow-ms"]);
    for (auto& c : conns) {
      if (c.kind == Kind::Slow && slow_tick && c.fd >= 0 && c.sent < hello.size()) {
        if (send(c.fd, hello.data() + c.sent, 1, MSG_NOSIGNAL) == 1) ++c.sent;
      }
      if (c.kind == Kind::Random || c.kind == Kind::BadVersion || c.kind == Kind::Close) {
        if (c.fd >= 0 && !closed_by_listener(c.fd)) continue;
        if (c.fd >= 0) close(c.fd);
        c.fd = -1;
        if (!open_conn(t, &c, bad_version, &made)) ++refused;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (auto& c : conns)
    if (c.fd >= 0) close(c.fd);
  printf("flood done: %llu connections made (%llu connects refused)\n",
         static_cast<unsigned long long>(made), static_cast<unsigned long long>(refused));
  return 0;
}
