#include "net_check.h"

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "hmc/plugin/status.hpp"
#include "net_loopback.h"
#include "props_rules.h"
#include "rules.h"
#include "wait.h"

namespace hmc::check {

hmc_net_mem_desc_t host_mem_desc(void* addr, size_t len, uint32_t access) {
  hmc_net_mem_desc_t d{};
  d.hdr = HMC_NET_ABI_HEADER_INIT(hmc_net_mem_desc_t);
  d.addr = addr;
  d.len = len;
  d.iface = HMC_MEM_IFACE_HOST;
  d.device_ordinal = -1;
  d.dmabuf_fd = -1;
  d.access = access;
  d.dmabuf_offset = 0;
  return d;
}

bool Buffer::reg(const Loopback& lb, hmc_net_ctx_t* ctx, uint32_t access, bool always,
                 const char* id) {
  if (!always && !(lb.device().flags & HMC_NET_FLAG_NEEDS_REG)) return true;
  hmc_net_mem_desc_t d = host_mem_desc(bytes_.data(), bytes_.size(), access);
  unsigned char rkey[HMC_NET_RKEY_MAX + 64];
  size_t rkey_len = 0;
  hmc_net_mr_t* mr = nullptr;
  int st = lb.t->reg_mr(ctx, lb.dev, &d, &mr, rkey, &rkey_len);
  if (st != HMC_PLUGIN_SUCCESS) {
    lb.report.fail(lb.id(id), rule::kRegister,
                   "reg_mr of %zu bytes of host memory on device %d returned %s", bytes_.size(),
                   lb.dev, hmc::plugin::status_name(st));
    return false;
  }
  t_ = lb.t;
  ctx_ = ctx;
  mr_ = mr;
  return true;
}

namespace {

using hmc::plugin::status_name;

constexpr uint32_t kKnownFlags = HMC_NET_FLAG_RMA | HMC_NET_FLAG_TAGGED | HMC_NET_FLAG_SAME_HOST |
                                 HMC_NET_FLAG_NEEDS_REG | HMC_NET_FLAG_DMABUF;

class NetCheck {
 public:
  NetCheck(const NetTarget& target, const NetOptions& options, Report& report)
      : t_(target.table),
        server_(target.ctx),
        host_(target.host),
        wait_(options.timeout),
        options_(options),
        r_(report) {}

  void run();

 private:
  bool devices();
  void wakeup();
  bool second_context();
  void loopback(int dev);
  // Listens on the loader's context, connects from the second one, accepts, waits until both
  // endpoints are ready.
  bool connect(Loopback& lb);
  void close(Loopback& lb);

  const hmc_net_plugin_v2_t* t_;
  hmc_net_ctx_t* server_;
  hmc_net_ctx_t* client_ = nullptr;
  const hmc_host_services_t* host_;
  Waiter wait_;
  NetOptions options_;
  Report& r_;
  int count_ = 0;
  std::vector<hmc_net_device_props_t> props_;
};

void NetCheck::run() {
  r_.step("devices");
  if (!devices()) return;
  wakeup();
  r_.step("a second context");
  if (!second_context()) return;
  for (int d : chosen_devices(r_, "loopback", options_.device, count_)) loopback(d);
  r_.step("finalize of the second context");
  int st = t_->finalize(client_);
  client_ = nullptr;
  if (st == HMC_PLUGIN_SUCCESS)
    r_.ok("finalize", "the second context finalized");
  else
    r_.fail("finalize", rule::kContexts, "finalize of the second context returned %s",
            status_name(st));
}

bool NetCheck::devices() {
  int st = t_->device_count(server_, &count_);
  if (st != HMC_PLUGIN_SUCCESS || count_ <= 0) {
    r_.fail("devices", rule::kNoDevice,
            "device_count returned %s with %d devices after a "
            "successful init",
            status_name(st), count_);
    return false;
  }
  std::string names;
  bool good = true;
  auto props = [&](int d, hmc_net_device_props_t* p) { return t_->device_props(server_, d, p); };
  hmc_net_device_props_t blank{};
  blank.hdr = HMC_NET_ABI_HEADER_INIT(hmc_net_device_props_t);
  for (int d = 0; d < count_; ++d) {
    hmc_net_device_props_t p = blank;
    if (!read_props(r_, "device_props", rule::kNetProps, d, &p, props)) return false;
    std::string name = p.name != nullptr ? p.name : "";
    names += (names.empty() ? "" : ", ") + (name.empty() ? "(unnamed)" : name);
    if (name.empty()) {
      r_.fail("device_props", rule::kNetProps, "device %d has no name", d);
      good = false;
    }
    if ((p.flags & ~kKnownFlags) != 0) {
      r_.fail("device_props", rule::kNetProps, "device %d (%s) sets undefined flags 0x%x", d,
              name.c_str(), p.flags & ~kKnownFlags);
      good = false;
    }
    if ((p.mem_ifaces & HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_HOST)) == 0) {
      r_.fail("device_props", rule::kNetProps,
              "device %d (%s) does not reach host memory (mem_ifaces 0x%llx)", d, name.c_str(),
              static_cast<unsigned long long>(p.mem_ifaces));
      good = false;
    }
#ifdef HMC_HAS_NET_RMA_MEM_IFACES
    if (p.rma_mem_ifaces != 0) {
      char mask[32];
      std::snprintf(mask, sizeof mask, "0x%llx", static_cast<unsigned long long>(p.rma_mem_ifaces));
      names += std::string(" (rma_mem_ifaces ") + mask + ": device memory by pointer for put/get)";
      if ((p.rma_mem_ifaces & HMC_MEM_IFACE_BIT(HMC_MEM_IFACE_HOST)) != 0 ||
          (p.flags & HMC_NET_FLAG_RMA) == 0) {
        r_.fail("device_props", rule::kNetProps,
                "device %d (%s) declares rma_mem_ifaces 0x%llx: %s", d, name.c_str(),
                static_cast<unsigned long long>(p.rma_mem_ifaces),
                (p.flags & HMC_NET_FLAG_RMA) == 0 ? "without HMC_NET_FLAG_RMA"
                                                  : "host memory belongs in mem_ifaces");
        good = false;
      }
    }
#endif
    props_.push_back(p);
  }
  if (good) r_.ok("device_props", "%d device%s: %s", count_, count_ == 1 ? "" : "s", names.c_str());

  // Out of range.
  ExpectedErrors quiet;
  check_indices_refused(r_, "device_props", count_, blank, props);

  // A caller that knows fewer fields: nothing past its struct_size may change.
  check_short_struct<hmc_net_device_props_t>(
      r_, "device_props", offsetof(hmc_net_device_props_t, mem_ifaces), HMC_NET_ABI_VERSION,
      [&](hmc_net_device_props_t* shorter) { return props(0, shorter); });
  return true;
}

void NetCheck::wakeup() {
  if (t_->wait_fd != nullptr) {
    int fd = -1;
    int st = t_->wait_fd(server_, &fd);
    if (st == HMC_PLUGIN_SUCCESS && fd >= 0)
      r_.ok("wait_fd", "fd %d", fd);
    else if (st == HMC_PLUGIN_ERR_NOT_SUPPORTED)
      r_.skip("wait_fd", "offered, but NOT_SUPPORTED in this context");
    else
      r_.fail("wait_fd", rule::kWakeup, "wait_fd returned %s with fd %d", status_name(st), fd);
  }
  if (t_->arm != nullptr) {
    int st = t_->arm(server_);
    if (st == HMC_PLUGIN_SUCCESS || st == HMC_PLUGIN_IN_PROGRESS ||
        st == HMC_PLUGIN_ERR_NOT_SUPPORTED)
      r_.ok("arm", "%s", status_name(st));
    else
      r_.fail("arm", rule::kWakeup, "arm returned %s", status_name(st));
  }
}

bool NetCheck::second_context() {
  int st = t_->init(host_, &client_);
  if (st != HMC_PLUGIN_SUCCESS || client_ == nullptr) {
    r_.fail("contexts", rule::kContexts, "a second init returned %s", status_name(st));
    client_ = nullptr;
    return false;
  }
  int n = 0;
  st = t_->device_count(client_, &n);
  if (st != HMC_PLUGIN_SUCCESS || n != count_) {
    r_.fail("contexts", rule::kContexts, "the second context has %d devices (%s), the first %d", n,
            status_name(st), count_);
    t_->finalize(client_);
    client_ = nullptr;
    return false;
  }
  r_.ok("contexts", "a second context, with the same %d device%s", n, n == 1 ? "" : "s");
  return true;
}

bool NetCheck::connect(Loopback& lb) {
  const int dev = lb.dev;
  const char* dname = props_[dev].name;
  r_.step("loopback: listen");
  unsigned char handle[HMC_NET_HANDLE_MAX + 64];
  size_t handle_len = 0;
  int st = t_->listen(server_, dev, handle, &handle_len, &lb.listener);
  if (st != HMC_PLUGIN_SUCCESS) {
    r_.fail(lb.id("listen"), rule::kListen, "listen on device %d (%s) returned %s", dev, dname,
            status_name(st));
    lb.listener = nullptr;
    return false;
  }
  if (handle_len == 0 || handle_len > HMC_NET_HANDLE_MAX) {
    r_.fail(lb.id("listen"), rule::kListen, "listen gave a handle of %zu bytes", handle_len);
    return false;
  }
  hmc_net_listener_t* other = nullptr;
  unsigned char other_handle[HMC_NET_HANDLE_MAX];
  size_t other_len = 0;
  {
    ExpectedErrors quiet;
    st = t_->listen(server_, count_, other_handle, &other_len, &other);
  }
  if (st == HMC_PLUGIN_SUCCESS) {
    r_.fail(lb.id("device_index"), rule::kDeviceIndex,
            "listen on device %d (of %d) returned SUCCESS", count_, count_);
    t_->close_listener(other);
  }
  r_.ok(lb.id("listen"), "device %d (%s): a %zu-byte handle", dev, dname, handle_len);

  r_.step("loopback: connect");
  st = t_->connect(client_, dev, handle, handle_len, &lb.client);
  if (st != HMC_PLUGIN_SUCCESS) {
    r_.fail(lb.id("connect"), rule::kConnect, "connect with the listener's handle returned %s",
            status_name(st));
    lb.client = nullptr;
    return false;
  }
  if ((t_->connect_hello == nullptr) != (t_->accept_hello == nullptr)) {
    r_.fail(lb.id("hello"), rule::kHello, "only one of connect_hello and accept_hello is offered");
  } else if (t_->connect_hello != nullptr) {
    // As the core does: the connector's hello travels to the listener before accept returns.
    std::vector<unsigned char> hello(HMC_NET_HELLO_MAX);
    size_t len = hello.size();
    st = t_->connect_hello(lb.client, hello.data(), &len);
    if (st != HMC_PLUGIN_SUCCESS || len > HMC_NET_HELLO_MAX) {
      r_.fail(lb.id("hello"), rule::kHello, "connect_hello returned %s with %zu bytes",
              status_name(st), len);
      return false;
    }
    if (len > 0) {
      st = t_->accept_hello(lb.listener, hello.data(), len);
      if (st != HMC_PLUGIN_SUCCESS) {
        r_.fail(lb.id("hello"), rule::kHello, "accept_hello of the %zu-byte hello returned %s", len,
                status_name(st));
        return false;
      }
    }
    r_.ok(lb.id("hello"), "a %zu-byte hello carried from connector to listener", len);
  }

  // One thread plays both sides: while the listener has not accepted, the connecting endpoint
  // is polled too (as the connecting process would).
  r_.step("loopback: accept");
  bool in_time =
      lb.waiter.until([&] { return static_cast<int>(t_->accept(lb.listener, &lb.server)); },
                      [&] {
                        lb.progress();
                        t_->ep_ready(lb.client);
                      },
                      &st);
  if (!in_time || st != HMC_PLUGIN_SUCCESS) {
    r_.fail(lb.id("connect"), rule::kConnect, "accept %s%s",
            in_time ? "returned " : "still answered IN_PROGRESS when the time was up",
            in_time ? status_name(st) : "");
    lb.server = nullptr;
    return false;
  }
  r_.step("loopback: ep_ready");
  int client_st = HMC_PLUGIN_IN_PROGRESS, server_st = HMC_PLUGIN_IN_PROGRESS;
  in_time = lb.waiter.until(
      [&] {
        client_st = t_->ep_ready(lb.client);
        server_st = t_->ep_ready(lb.server);
        if (client_st == HMC_PLUGIN_IN_PROGRESS || server_st == HMC_PLUGIN_IN_PROGRESS)
          return static_cast<int>(HMC_PLUGIN_IN_PROGRESS);
        return client_st != HMC_PLUGIN_SUCCESS ? client_st : server_st;
      },
      [&] { lb.progress(); }, &st);
  if (!in_time || st != HMC_PLUGIN_SUCCESS) {
    r_.fail(lb.id("connect"), rule::kConnect,
            "ep_ready of the connecting endpoint answered %s, of the accepted one %s%s",
            status_name(client_st), status_name(server_st), in_time ? "" : " when the time was up");
    return false;
  }
  r_.ok(lb.id("connect"), "connected, accepted, both endpoints ready");
  return true;
}

void NetCheck::close(Loopback& lb) {
  r_.step("loopback: close");
  int st = HMC_PLUGIN_SUCCESS;
  for (hmc_net_ep_t* ep : {lb.client, lb.server})
    if (ep != nullptr && st == HMC_PLUGIN_SUCCESS) st = t_->close_ep(ep);
  if (lb.listener != nullptr && st == HMC_PLUGIN_SUCCESS) st = t_->close_listener(lb.listener);
  if (st != HMC_PLUGIN_SUCCESS)
    r_.fail(lb.id("close"), rule::kClose, "closing the endpoints and the listener: %s",
            status_name(st));
  lb.client = lb.server = nullptr;
  lb.listener = nullptr;
}

void NetCheck::loopback(int dev) {
  Loopback lb{
      t_,     server_, client_, dev,
      props_, wait_,   r_,      options_.device < 0 ? "dev" + std::to_string(dev) + "." : ""};
  const hmc_net_device_props_t& p = lb.device();
  if (connect(lb)) {
    if (p.flags & HMC_NET_FLAG_TAGGED)
      check_messages(lb);
    else
      r_.skip(lb.id("messages"), "device %d (%s) does not set HMC_NET_FLAG_TAGGED", dev, p.name);
    if (p.flags & HMC_NET_FLAG_RMA)
      check_rma(lb);
    else
      r_.skip(lb.id("one-sided"), "device %d (%s) does not set HMC_NET_FLAG_RMA", dev, p.name);
    if (p.flags & HMC_NET_FLAG_TAGGED) {
      check_wakeup(lb);
      check_peer_lost(lb);
    }
  }
  close(lb);
}

}  // namespace

void check_net(const NetTarget& target, const NetOptions& options, Report& report) {
  NetCheck(target, options, report).run();
}

}  // namespace hmc::check
