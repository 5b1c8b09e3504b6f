// Socket plumbing: address resolution for the tcp device, tuned non-blocking TCP sockets,
// abstract Unix socket addresses, and passing file descriptors with SCM_RIGHTS.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <string>
#include <vector>

#include "config.h"
#include "handle.h"
#include "log.h"
#include "util.h"

namespace hmc::hoststage {

// Where the tcp device listens, what it advertises, and what its outgoing streams bind to.
struct TcpAddresses {
  std::vector<uint32_t> listen;     // network order; INADDR_ANY allowed
  std::vector<uint32_t> advertise;  // one per listen entry, never INADDR_ANY
  std::vector<uint32_t> bind;       // source addresses for outgoing streams; empty: kernel picks
};

// From HMC_HOSTSTAGE_IFNAMES (each interface's first IPv4 address), else HMC_LISTEN_HOST
// (0.0.0.0: listen on all, advertise the first non-loopback IPv4 address, or 127.0.0.1).
// Logs and returns HMC_PLUGIN_ERR_INVALID_ARGUMENT naming the variable when it cannot be used.
hmc_plugin_status_t resolve_tcp_addresses(const Config& cfg, const Log& log, TcpAddresses* out);

// A non-blocking, close-on-exec TCP socket with TCP_NODELAY and the configured buffer sizes.
// Returns -1 with errno set on failure.
int make_tcp_socket(const Config& cfg);
void tune_tcp_socket(int fd, const Config& cfg);

// Fills an abstract-namespace address for name; returns its length.
socklen_t make_unix_address(const std::string& name, sockaddr_un* out);

// sendmsg with MSG_NOSIGNAL and, when nfds > 0, SCM_RIGHTS. Returns bytes sent or -1 (errno).
ssize_t send_with_fds(int sock, const void* buf, size_t len, const int* fds, int nfds);
// recvmsg that collects any SCM_RIGHTS descriptors (close-on-exec) into *fds.
ssize_t recv_with_fds(int sock, void* buf, size_t len, std::vector<Fd>* fds);

// strerror without the thread-safety caveats.
std::string errno_text(int err);

}  // namespace hmc::hoststage
