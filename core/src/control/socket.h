// Sockets of the control plane: TCP across hosts, abstract-namespace Unix sockets within one.
//
// Contract shared by every function here:
//  - every socket created is non-blocking and close-on-exec; connected TCP sockets have
//    TCP_NODELAY (control messages are small and latency-bound);
//  - writes use MSG_NOSIGNAL (see Channel), so a closed peer never raises SIGPIPE;
//  - on failure the calling thread's error message (hmc::last_error) names the operation, the
//    address and strerror(errno); outputs are set only on success.
#pragma once

#include <cstdint>
#include <string>

#include "control/fd.h"
#include "hmc/hmc.h"

namespace hmc::control {

// Listens on host:port (port 0: any free port). host is an IPv4 or IPv6 literal ("0.0.0.0",
// "127.0.0.1", "::1", "[::1]") or a name resolved with getaddrinfo (first address that binds).
// SO_REUSEADDR is set. *bound_port (may be NULL) receives the actual port.
// Errors: HMC_ERR_INVALID_ARGUMENT (out is NULL), HMC_ERR_SYSTEM (resolve/socket/bind/listen).
hmc_status_t listen_tcp(const std::string& host, uint16_t port, Fd* out, uint16_t* bound_port);

// Listens on the abstract Unix socket "\0name" (name given without the leading NUL; at most 107
// bytes, not empty). Abstract names vanish with the last descriptor: nothing to unlink.
// Errors: HMC_ERR_INVALID_ARGUMENT (bad name), HMC_ERR_SYSTEM (e.g. EADDRINUSE).
hmc_status_t listen_unix(const std::string& name, Fd* out);

// Accepts one pending connection without blocking. HMC_IN_PROGRESS when none is pending,
// HMC_ERR_SYSTEM on other failures (EMFILE ...). *remote (may be NULL) says who connected, for
// messages: "tcp 192.0.2.7:40112", or "unix pid 4242" (abstract-socket clients have no name;
// the kernel's SO_PEERCRED says which process it is).
hmc_status_t accept_one(int listen_fd, Fd* out, std::string* remote = nullptr);

// Connects to host:port within timeout_ms (>= 0; 0 means: only if it completes at once).
// Tries every address getaddrinfo returns, in order, within the one overall timeout.
// Name resolution itself is not bounded by the timeout (getaddrinfo has no timeout parameter);
// use literal addresses where that matters.
// Errors: HMC_ERR_TIMEOUT (not connected in time), HMC_ERR_SYSTEM (resolve failure, refused,
// unreachable: the message has host:port and the errno text), HMC_ERR_INVALID_ARGUMENT.
hmc_status_t connect_tcp(const std::string& host, uint16_t port, int timeout_ms, Fd* out);

// Connects to the abstract Unix socket "\0name" within timeout_ms (>= 0). Waits (bounded) while
// the listener's backlog is full. Errors: HMC_ERR_TIMEOUT, HMC_ERR_SYSTEM (ECONNREFUSED: nobody
// listens on that name), HMC_ERR_INVALID_ARGUMENT.
hmc_status_t connect_unix(const std::string& name, int timeout_ms, Fd* out);

// "<hostname>/<boot_id>": equal on two processes exactly when they run on the same machine in
// the same boot (containers sharing a kernel share the boot id, hence the hostname too). Falls
// back to the hostname alone when /proc/sys/kernel/random/boot_id cannot be read.
std::string host_identity();
// gethostname(), "" when it fails.
std::string local_hostname();

// Waits with poll(2) until fd reports one of `events` or the deadline (now_ns() based) passes;
// EINTR restarts the wait with the remaining time. Returns 1 (ready, *revents set when not NULL),
// 0 (deadline passed) or -1 (poll failed; errno set).
int wait_fd(int fd, short events, uint64_t deadline_ns, short* revents);

// "host:port" with IPv6 literals bracketed, for messages and address blobs.
std::string format_host_port(const std::string& host, uint16_t port);

}  // namespace hmc::control
