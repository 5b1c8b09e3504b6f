#include "coll/store.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "coll/store_wire.h"
#include "control/socket.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/status.h"

namespace hmc::coll {

namespace {

using namespace store_wire;

// Writes all of data before the deadline (the sockets are non-blocking). False on failure.
bool write_all(int fd, const std::string& data, uint64_t deadline_ns) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += size_t(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
    if (control::wait_fd(fd, POLLOUT, deadline_ns, nullptr) <= 0) return false;
  }
  return true;
}

// Reads exactly len bytes before the deadline. 0: done, 1: the peer closed, -1: error or late.
int read_exact(int fd, char* out, size_t len, uint64_t deadline_ns) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = ::recv(fd, out + done, len - done, 0);
    if (n > 0) {
      done += size_t(n);
      continue;
    }
    if (n == 0) return 1;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
    if (control::wait_fd(fd, POLLIN, deadline_ns, nullptr) <= 0) return -1;
  }
  return 0;
}

}  // namespace

StoreServer::~StoreServer() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

hmc_status_t StoreServer::start(const std::string& host, uint16_t port) {
  hmc_status_t st = control::listen_tcp(host, port, &listener_, nullptr);
  if (st != HMC_SUCCESS)
    return fail(st, "the rendezvous store could not be hosted at tcp://{}: {}",
                control::format_host_port(host, port), last_error());
  thread_ = std::thread([this] { serve(); });
  return HMC_SUCCESS;
}

void StoreServer::serve() {
  struct Client {
    control::Fd fd;
    std::string in;
  };
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<struct pollfd> fds;
  while (!stopping_) {
    fds.clear();
    fds.push_back({listener_.get(), POLLIN, 0});
    for (auto& c : clients) fds.push_back({c->fd.get(), POLLIN, 0});
    // Short, so that destruction is noticed quickly.
    if (poll(fds.data(), fds.size(), 20) <= 0) continue;
    if (fds[0].revents & POLLIN) {
      control::Fd fd;
      if (control::accept_one(listener_.get(), &fd) == HMC_SUCCESS) {
        auto c = std::make_unique<Client>();
        c->fd = std::move(fd);
        clients.push_back(std::move(c));
      }
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Client& c = *clients[i - 1];
      char buf[4096];
      ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        c.fd.reset();
        continue;
      }
      if (n > 0) c.in.append(buf, size_t(n));
      for (;;) {
        Request req;
        Take t = take_request(&c.in, &req);
        if (t == Take::kNeedMore) break;
        if (t == Take::kMalformed)
          HMC_LOG_W("rendezvous store: a malformed request; the client is dropped");
        if (t != Take::kOk) {
          c.fd.reset();
          break;
        }
        if (!write_all(c.fd.get(), store_wire::serve(req, &data_), now_ns() + 1000000000ull)) {
          c.fd.reset();
          break;
        }
      }
    }
    for (size_t i = 0; i < clients.size();) {
      if (clients[i]->fd.valid()) {
        ++i;
        continue;
      }
      clients.erase(clients.begin() + long(i));
    }
  }
}

hmc_status_t StoreClient::connect(const std::string& host, uint16_t port, uint64_t deadline_ns) {
  where_ = "tcp://" + control::format_host_port(host, port);
  std::string last;
  for (;;) {
    uint64_t now = now_ns();
    int slice =
        int(std::min<uint64_t>(deadline_ns > now ? (deadline_ns - now) / 1000000 : 0, 1000));
    hmc_status_t st = control::connect_tcp(host, port, slice, &fd_);
    if (st == HMC_SUCCESS) return HMC_SUCCESS;
    last = last_error();
    if (now_ns() >= deadline_ns) break;
    usleep(20000);  // the host (rank 0) may not listen yet
  }
  return fail(HMC_ERR_SYSTEM, "the rendezvous store at {} could not be reached in time: {}", where_,
              last);
}

hmc_status_t StoreClient::call(uint8_t op, const std::string& key, const std::string& value,
                               bool* found, std::string* reply, uint64_t deadline_ns) {
  if (!fd_.valid())
    return fail(HMC_ERR_SYSTEM, "the rendezvous store at {} is not connected", where_);
  std::string req = encode_request(op, key, value);
  if (!write_all(fd_.get(), req, deadline_ns))
    return fail(HMC_ERR_SYSTEM, "the rendezvous store at {} went away (writing '{}'): {}", where_,
                key, errno ? strerror(errno) : "timed out");
  char head[kReplyHead];
  int rc = read_exact(fd_.get(), head, sizeof head, deadline_ns);
  std::string body;
  bool was_found = false;
  if (rc == 0) {
    uint32_t len = 0;
    if (!decode_reply_head(head, &was_found, &len)) {
      rc = -1;  // before allocating what a store that sends garbage announces (up to 4 GiB)
    } else if (len) {
      body.resize(len);
      rc = read_exact(fd_.get(), body.data(), len, deadline_ns);
    }
  }
  if (rc != 0) {
    fd_.reset();
    return fail(HMC_ERR_SYSTEM, "the rendezvous store at {} went away (reading '{}'): {}", where_,
                key, rc == 1 ? "it closed the connection" : "no answer in time");
  }
  if (found) *found = was_found;
  if (reply) *reply = std::move(body);
  return HMC_SUCCESS;
}

hmc_status_t StoreClient::set(const std::string& key, const std::string& value,
                              uint64_t deadline_ns) {
  return call(kSet, key, value, nullptr, nullptr, deadline_ns);
}

hmc_status_t StoreClient::get(const std::string& key, std::string* value, bool* found,
                              uint64_t deadline_ns) {
  return call(kGet, key, "", found, value, deadline_ns);
}

hmc_status_t StoreClient::claim(const std::string& key, const std::string& value,
                                std::string* stored, uint64_t deadline_ns) {
  return call(kClaim, key, value, nullptr, stored, deadline_ns);
}

}  // namespace hmc::coll
