/*
 * The net plugin table (hmc/plugin/net.h) filled from a C++ plugin's own types: what every slot
 * of every net plugin does at the C boundary, written once. Header-only C++17 and no part of
 * the ABI, like boundary.hpp: it is compiled into the plugin that includes it.
 *
 * For every slot the adaptor
 *  - catches every exception (guarded: std::bad_alloc is HMC_PLUGIN_ERR_NO_MEMORY, anything
 *    else HMC_PLUGIN_ERR_INTERNAL), so none crosses the ABI;
 *  - refuses with HMC_PLUGIN_ERR_INVALID_ARGUMENT, before the plugin's code runs, what no plugin
 *    can take: a NULL handle or out-pointer, a NULL buffer (or iov array, or iov piece) with a
 *    nonzero length, a device index the context does not have, device props without a whole
 *    header, a memory descriptor older than this SDK's;
 *  - checks the host services init receives (check_host_services, which logs why it refuses);
 *  - turns the opaque handles into the plugin's types and back, and stores an object the
 *    plugin made in the caller's out-pointer only when the plugin returned HMC_PLUGIN_SUCCESS;
 *  - fills the table's header, name, version and configuration variables, and leaves NULL
 *    every optional slot the plugin does not define.
 *
 * The plugin describes itself as a struct of static functions taking its own types (references
 * where the adaptor checked the handle, pointers where the caller may pass NULL). Deriving it
 * from NetPlugin<...> names the six types and gives the defaults the in-tree plugins share;
 * defining a function of the same name replaces a default. A function returning void stands for
 * one that always returns HMC_PLUGIN_SUCCESS.
 *
 *   struct Mine : hmc::plugin::NetPlugin<Context, Endpoint, Listener, Request, Region, Key> {
 *     static hmc_plugin_status_t device_props(Context& c, int dev, hmc_net_device_props_t* p);
 *     static hmc_plugin_status_t listen(Context& c, int dev, void* handle, size_t* handle_len,
 *                                       Listener** out);
 *     static hmc_plugin_status_t connect(Context& c, int dev, const void* handle, size_t len,
 *                                        Endpoint** out);
 *     static hmc_plugin_status_t test(Request& r, int* done, size_t* bytes);
 *     static hmc_plugin_status_t isend(Endpoint& e, const void* buf, size_t len, Region* mr,
 *                                      uint64_t tag, Request** out);
 *     ...
 *   };
 *   constexpr hmc_net_plugin_v2_t kTable = hmc::plugin::net_table<Mine>("mine", "1.0", kVars);
 *   extern "C" HMC_PLUGIN_EXPORT const hmc_net_plugin_v2_t* hmc_net_plugin_v2(void) {
 *     return &kTable;
 *   }
 *
 * Required (a default from NetPlugin, or the plugin's own):
 *   init(const hmc_host_services_t*, Context**)      default Context::create(host, out)
 *   finalize(Context&)                                 default delete
 *   device_count(Context&) -> int                      default c.device_count()
 *   valid_device(Context&, int dev) -> bool            default c.valid_device(dev)
 *   device_props(Context&, int dev, hmc_net_device_props_t*)
 *   listen(Context&, int dev, void* handle, size_t* handle_len, Listener**)
 *   accept(Listener&, Endpoint**)                      default l.accept(out)
 *   close_listener(Listener&)                          default delete
 *   connect(Context&, int dev, const void* handle, size_t len, Endpoint**), or, where the
 *     plugin defines a type Handle: connect(Context&, int dev, const Handle&, Endpoint**), the
 *     adaptor decoding the handle with decode_handle(const uint8_t*, size_t, Handle*,
 *     std::string* why) -> bool (the plugin's static one, or else a function beside Handle,
 *     found by argument-dependent lookup) and, when that fails, logging "connect: invalid
 *     connection handle: <why>" through log(Context&) -> const Log&   default c.log()
 *   ep_ready(Endpoint&)                                default e.ready_status()
 *   close_ep(Endpoint&)                                default delete
 *   test(Request&, int* done, size_t* bytes)           see report_test
 * Optional (a slot the plugin does not define stays NULL):
 *   reg_mr(Context&, int dev, const hmc_net_mem_desc_t&, MemRegion**, void* rkey, size_t* len)
 *   dereg_mr(Context&, MemRegion&)
 *   isend(Endpoint&, const void*, size_t, MemRegion*, uint64_t tag, Request**)
 *   irecv(Endpoint&, void*, size_t, MemRegion*, uint64_t tag, Request**)
 *   rkey_unpack(Endpoint&, const void* rkey, size_t len, RemoteKey**)
 *   rkey_release(RemoteKey&)
 *   iput(Endpoint&, const void*, size_t, MemRegion*, uint64_t remote, RemoteKey&, Request**)
 *   iget(Endpoint&, void*, size_t, MemRegion*, uint64_t remote, RemoteKey&, Request**)
 *   cancel(Request&), progress(Context&), wait_fd(Context&, int*), arm(Context&)
 *   connect_hello(Endpoint&, void*, size_t*), accept_hello(Listener&, const void*, size_t)
 *   iflush(Endpoint&, void*, size_t, MemRegion*, Request**)
 *   iput_v / iget_v(Endpoint&, const hmc_net_iov_t*, size_t count, RemoteKey&, Request**)
 *   iput_notify(Endpoint&, const void*, size_t, MemRegion*, uint64_t remote, RemoteKey&,
 *               uint64_t value, Request**), notify_poll(Endpoint&, uint64_t*)
 */
#ifndef HMC_PLUGIN_NET_ADAPTOR_HPP
#define HMC_PLUGIN_NET_ADAPTOR_HPP

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "hmc/plugin/boundary.hpp"
#include "hmc/plugin/log.hpp"
#include "hmc/plugin/net.h"

namespace hmc::plugin {

// The types a net plugin's objects have, and the defaults the in-tree plugins share.
template <typename Ctx, typename Ep, typename Lis, typename Req, typename Mr, typename Rkey>
struct NetPlugin {
  using Context = Ctx;
  using Endpoint = Ep;
  using Listener = Lis;
  using Request = Req;
  using MemRegion = Mr;
  using RemoteKey = Rkey;

  static hmc_plugin_status_t init(const hmc_host_services_t* host, Context** out) {
    return Context::create(host, out);
  }
  static const Log& log(Context& c) { return c.log(); }
  static void finalize(Context& c) { delete &c; }
  static int device_count(Context& c) { return c.device_count(); }
  static bool valid_device(Context& c, int dev) { return c.valid_device(dev); }
  static hmc_plugin_status_t accept(Listener& l, Endpoint** out) { return l.accept(out); }
  static void close_listener(Listener& l) { delete &l; }
  static hmc_plugin_status_t ep_ready(Endpoint& e) { return e.ready_status(); }
  static void close_ep(Endpoint& e) { delete &e; }
};

// The end of a test slot for a request with fields done (bool), result and bytes: *done = 0
// and SUCCESS while it is pending; once it ended, *done = 1, its bytes in *bytes (when not
// NULL), release() called, and its result returned.
template <typename R, typename Release>
hmc_plugin_status_t report_test(R& r, int* done, size_t* bytes, Release&& release) {
  if (!r.done) {
    *done = 0;
    return HMC_PLUGIN_SUCCESS;
  }
  const hmc_plugin_status_t st = r.result;
  if (bytes != nullptr) *bytes = r.bytes;
  *done = 1;
  release();
  return st;
}

namespace net_detail {

// HMC_PLUGIN_SUCCESS for a plugin function returning void, its status otherwise.
template <typename F>
hmc_plugin_status_t status_of(F&& f) {
  if constexpr (std::is_void_v<decltype(f())>) {
    f();
    return HMC_PLUGIN_SUCCESS;
  } else {
    return f();
  }
}

// Runs make(T**) and stores what it made in *out, as the C type C, on success only.
template <typename T, typename C, typename Make>
hmc_plugin_status_t produce(C** out, Make&& make) {
  T* made = nullptr;
  const hmc_plugin_status_t st = make(&made);
  if (st == HMC_PLUGIN_SUCCESS) *out = reinterpret_cast<C*>(made);
  return st;
}

// Whether the plugin P defines the static function (or type) name.
#define HMC_NET_ADAPTOR_DETECT(name)                                            \
  template <typename P, typename = void>                                        \
  struct detect_##name : std::false_type {};                                    \
  template <typename P>                                                         \
  struct detect_##name<P, std::void_t<decltype(&P::name)>> : std::true_type {}; \
  template <typename P>                                                         \
  constexpr bool has_##name = detect_##name<P>::value;
HMC_NET_ADAPTOR_DETECT(reg_mr)
HMC_NET_ADAPTOR_DETECT(dereg_mr)
HMC_NET_ADAPTOR_DETECT(isend)
HMC_NET_ADAPTOR_DETECT(irecv)
HMC_NET_ADAPTOR_DETECT(rkey_unpack)
HMC_NET_ADAPTOR_DETECT(rkey_release)
HMC_NET_ADAPTOR_DETECT(iput)
HMC_NET_ADAPTOR_DETECT(iget)
HMC_NET_ADAPTOR_DETECT(cancel)
HMC_NET_ADAPTOR_DETECT(progress)
HMC_NET_ADAPTOR_DETECT(wait_fd)
HMC_NET_ADAPTOR_DETECT(arm)
HMC_NET_ADAPTOR_DETECT(connect_hello)
HMC_NET_ADAPTOR_DETECT(accept_hello)
HMC_NET_ADAPTOR_DETECT(iflush)
HMC_NET_ADAPTOR_DETECT(iput_v)
HMC_NET_ADAPTOR_DETECT(iget_v)
HMC_NET_ADAPTOR_DETECT(iput_notify)
HMC_NET_ADAPTOR_DETECT(notify_poll)

HMC_NET_ADAPTOR_DETECT(decode_handle)
#undef HMC_NET_ADAPTOR_DETECT

template <typename P, typename = void>
struct decodes_handle : std::false_type {};
template <typename P>
struct decodes_handle<P, std::void_t<typename P::Handle>> : std::true_type {};

// The plugin's decode_handle, or the one beside its Handle type.
template <typename P>
bool decode(const uint8_t* p, size_t n, typename P::Handle* h, std::string* why) {
  if constexpr (has_decode_handle<P>) {
    return P::decode_handle(p, n, h, why);
  } else {
    return decode_handle(p, n, h, why);
  }
}

// The slots, one C function each, for the plugin P.
template <typename P>
struct NetSlots {
  using Ctx = typename P::Context;
  using Ep = typename P::Endpoint;
  using Lis = typename P::Listener;
  using Req = typename P::Request;
  using Mr = typename P::MemRegion;
  using Rkey = typename P::RemoteKey;
  static constexpr hmc_plugin_status_t kInvalid = HMC_PLUGIN_ERR_INVALID_ARGUMENT;

  static Ctx& ctx(hmc_net_ctx_t* c) { return *reinterpret_cast<Ctx*>(c); }
  static Ep& ep(hmc_net_ep_t* e) { return *reinterpret_cast<Ep*>(e); }
  static Lis& lis(hmc_net_listener_t* l) { return *reinterpret_cast<Lis*>(l); }
  static Req& req(hmc_net_request_t* r) { return *reinterpret_cast<Req*>(r); }
  static Mr* mr(hmc_net_mr_t* m) { return reinterpret_cast<Mr*>(m); }
  static Rkey& rkey(hmc_net_rkey_t* k) { return *reinterpret_cast<Rkey*>(k); }
  // A buffer of len bytes may be NULL only when empty.
  static bool bad_buf(const void* buf, size_t len) { return buf == nullptr && len > 0; }
  static bool bad_iov(const hmc_net_iov_t* iov, size_t count) {
    if (iov == nullptr) return count > 0;
    for (size_t i = 0; i < count; ++i)
      if (bad_buf(iov[i].buf, iov[i].len)) return true;
    return false;
  }

  static hmc_plugin_status_t init(const hmc_host_services_t* host, hmc_net_ctx_t** out) {
    return guarded([&] {
      if (out == nullptr) return kInvalid;
      const hmc_plugin_status_t checked = check_host_services(host, HMC_NET_ABI_VERSION);
      if (checked != HMC_PLUGIN_SUCCESS) return checked;
      return produce<Ctx>(out, [&](Ctx** c) { return P::init(host, c); });
    });
  }
  static hmc_plugin_status_t finalize(hmc_net_ctx_t* c) {
    return guarded([&] {
      if (c == nullptr) return kInvalid;
      return status_of([&] { return P::finalize(ctx(c)); });
    });
  }
  static hmc_plugin_status_t device_count(hmc_net_ctx_t* c, int* count) {
    return guarded([&] {
      if (c == nullptr || count == nullptr) return kInvalid;
      *count = P::device_count(ctx(c));
      return HMC_PLUGIN_SUCCESS;
    });
  }
  static hmc_plugin_status_t device_props(hmc_net_ctx_t* c, int dev,
                                          hmc_net_device_props_t* props) {
    return guarded([&] {
      if (c == nullptr || props == nullptr || props->hdr.struct_size < sizeof(hmc_abi_header_t) ||
          !P::valid_device(ctx(c), dev))
        return kInvalid;
      return status_of([&] { return P::device_props(ctx(c), dev, props); });
    });
  }
  static hmc_plugin_status_t listen(hmc_net_ctx_t* c, int dev, void* handle, size_t* handle_len,
                                    hmc_net_listener_t** out) {
    return guarded([&] {
      if (c == nullptr || handle == nullptr || handle_len == nullptr || out == nullptr ||
          !P::valid_device(ctx(c), dev))
        return kInvalid;
      return produce<Lis>(out,
                          [&](Lis** l) { return P::listen(ctx(c), dev, handle, handle_len, l); });
    });
  }
  static hmc_plugin_status_t accept(hmc_net_listener_t* l, hmc_net_ep_t** out) {
    return guarded([&] {
      if (l == nullptr || out == nullptr) return kInvalid;
      return produce<Ep>(out, [&](Ep** e) { return P::accept(lis(l), e); });
    });
  }
  static hmc_plugin_status_t close_listener(hmc_net_listener_t* l) {
    return guarded([&] {
      if (l == nullptr) return kInvalid;
      return status_of([&] { return P::close_listener(lis(l)); });
    });
  }
  static hmc_plugin_status_t connect(hmc_net_ctx_t* c, int dev, const void* handle,
                                     size_t handle_len, hmc_net_ep_t** out) {
    return guarded([&] {
      if (c == nullptr || handle == nullptr || out == nullptr || !P::valid_device(ctx(c), dev))
        return kInvalid;
      if constexpr (decodes_handle<P>::value) {
        typename P::Handle h;
        std::string why;
        if (!decode<P>(static_cast<const uint8_t*>(handle), handle_len, &h, &why)) {
          const Log& log = P::log(ctx(c));
          HMC_PLUGIN_LOG(log, HMC_LOG_ERROR, "connect: invalid connection handle: %s", why.c_str());
          return kInvalid;
        }
        return produce<Ep>(out, [&](Ep** e) { return P::connect(ctx(c), dev, h, e); });
      } else {
        return produce<Ep>(out,
                           [&](Ep** e) { return P::connect(ctx(c), dev, handle, handle_len, e); });
      }
    });
  }
  static hmc_plugin_status_t ep_ready(hmc_net_ep_t* e) {
    return guarded([&] {
      if (e == nullptr) return kInvalid;
      return P::ep_ready(ep(e));
    });
  }
  static hmc_plugin_status_t close_ep(hmc_net_ep_t* e) {
    return guarded([&] {
      if (e == nullptr) return kInvalid;
      return status_of([&] { return P::close_ep(ep(e)); });
    });
  }
  static hmc_plugin_status_t test(hmc_net_request_t* r, int* done, size_t* bytes) {
    return guarded([&] {
      if (r == nullptr || done == nullptr) return kInvalid;
      return P::test(req(r), done, bytes);
    });
  }

  static hmc_plugin_status_t reg_mr(hmc_net_ctx_t* c, int dev, const hmc_net_mem_desc_t* mem,
                                    hmc_net_mr_t** out, void* key, size_t* key_len) {
    return guarded([&] {
      if (c == nullptr || mem == nullptr || out == nullptr || key == nullptr ||
          key_len == nullptr || !HMC_ABI_HAS_FIELD(mem, hmc_net_mem_desc_t, dmabuf_offset) ||
          !P::valid_device(ctx(c), dev))
        return kInvalid;
      return produce<Mr>(out,
                         [&](Mr** m) { return P::reg_mr(ctx(c), dev, *mem, m, key, key_len); });
    });
  }
  static hmc_plugin_status_t dereg_mr(hmc_net_ctx_t* c, hmc_net_mr_t* m) {
    return guarded([&] {
      if (c == nullptr || m == nullptr) return kInvalid;
      return status_of([&] { return P::dereg_mr(ctx(c), *mr(m)); });
    });
  }
  static hmc_plugin_status_t isend(hmc_net_ep_t* e, const void* buf, size_t len, hmc_net_mr_t* m,
                                   uint64_t tag, hmc_net_request_t** out) {
    return guarded([&] {
      if (e == nullptr || out == nullptr || bad_buf(buf, len)) return kInvalid;
      return produce<Req>(out, [&](Req** r) { return P::isend(ep(e), buf, len, mr(m), tag, r); });
    });
  }
  static hmc_plugin_status_t irecv(hmc_net_ep_t* e, void* buf, size_t len, hmc_net_mr_t* m,
                                   uint64_t tag, hmc_net_request_t** out) {
    return guarded([&] {
      if (e == nullptr || out == nullptr || bad_buf(buf, len)) return kInvalid;
      return produce<Req>(out, [&](Req** r) { return P::irecv(ep(e), buf, len, mr(m), tag, r); });
    });
  }
  static hmc_plugin_status_t rkey_unpack(hmc_net_ep_t* e, const void* key, size_t key_len,
                                         hmc_net_rkey_t** out) {
    return guarded([&] {
      if (e == nullptr || key == nullptr || out == nullptr) return kInvalid;
      return produce<Rkey>(out, [&](Rkey** k) { return P::rkey_unpack(ep(e), key, key_len, k); });
    });
  }
  static hmc_plugin_status_t rkey_release(hmc_net_rkey_t* k) {
    return guarded([&] {
      if (k == nullptr) return kInvalid;
      return status_of([&] { return P::rkey_release(rkey(k)); });
    });
  }
  static hmc_plugin_status_t iput(hmc_net_ep_t* e, const void* buf, size_t len, hmc_net_mr_t* m,
                                  uint64_t remote, hmc_net_rkey_t* k, hmc_net_request_t** out) {
    return guarded([&] {
      if (e == nullptr || k == nullptr || out == nullptr || bad_buf(buf, len)) return kInvalid;
      return produce<Req>(
          out, [&](Req** r) { return P::iput(ep(e), buf, len, mr(m), remote, rkey(k), r); });
    });
  }
  static hmc_plugin_status_t iget(hmc_net_ep_t* e, void* buf, size_t len, hmc_net_mr_t* m,
                                  uint64_t remote, hmc_net_rkey_t* k, hmc_net_request_t** out) {
    return guarded([&] {
      if (e == nullptr || k == nullptr || out == nullptr || bad_buf(buf, len)) return kInvalid;
      return produce<Req>(
          out, [&](Req** r) { return P::iget(ep(e), buf, len, mr(m), remote, rkey(k), r); });
    });
  }
  static hmc_plugin_status_t cancel(hmc_net_request_t* r) {
    return guarded([&] {
      if (r == nullptr) return kInvalid;
      return P::cancel(req(r));
    });
  }
  static hmc_plugin_status_t progress(hmc_net_ctx_t* c) {
    return guarded([&] {
      if (c == nullptr) return kInvalid;
      return status_of([&] { return P::progress(ctx(c)); });
    });
  }
  static hmc_plugin_status_t wait_fd(hmc_net_ctx_t* c, int* fd) {
    return guarded([&] {
      if (c == nullptr || fd == nullptr) return kInvalid;
      return status_of([&] { return P::wait_fd(ctx(c), fd); });
    });
  }
  static hmc_plugin_status_t arm(hmc_net_ctx_t* c) {
    return guarded([&] {
      if (c == nullptr) return kInvalid;
      return P::arm(ctx(c));
    });
  }
  static hmc_plugin_status_t connect_hello(hmc_net_ep_t* e, void* hello, size_t* len) {
    return guarded([&] {
      if (e == nullptr || hello == nullptr || len == nullptr) return kInvalid;
      return P::connect_hello(ep(e), hello, len);
    });
  }
  static hmc_plugin_status_t accept_hello(hmc_net_listener_t* l, const void* hello, size_t len) {
    return guarded([&] {
      if (l == nullptr || bad_buf(hello, len)) return kInvalid;
      return P::accept_hello(lis(l), hello, len);
    });
  }
  static hmc_plugin_status_t iflush(hmc_net_ep_t* e, void* buf, size_t len, hmc_net_mr_t* m,
                                    hmc_net_request_t** out) {
    return guarded([&] {
      if (e == nullptr || out == nullptr || bad_buf(buf, len)) return kInvalid;
      return produce<Req>(out, [&](Req** r) { return P::iflush(ep(e), buf, len, mr(m), r); });
    });
  }
  static hmc_plugin_status_t iput_v(hmc_net_ep_t* e, const hmc_net_iov_t* iov, size_t count,
                                    hmc_net_rkey_t* k, hmc_net_request_t** out) {
    return guarded([&] {
      if (e == nullptr || k == nullptr || out == nullptr || bad_iov(iov, count)) return kInvalid;
      return produce<Req>(out, [&](Req** r) { return P::iput_v(ep(e), iov, count, rkey(k), r); });
    });
  }
  static hmc_plugin_status_t iget_v(hmc_net_ep_t* e, const hmc_net_iov_t* iov, size_t count,
                                    hmc_net_rkey_t* k, hmc_net_request_t** out) {
    return guarded([&] {
      if (e == nullptr || k == nullptr || out == nullptr || bad_iov(iov, count)) return kInvalid;
      return produce<Req>(out, [&](Req** r) { return P::iget_v(ep(e), iov, count, rkey(k), r); });
    });
  }
  static hmc_plugin_status_t iput_notify(hmc_net_ep_t* e, const void* buf, size_t len,
                                         hmc_net_mr_t* m, uint64_t remote, hmc_net_rkey_t* k,
                                         uint64_t value, hmc_net_request_t** out) {
    return guarded([&] {
      if (e == nullptr || k == nullptr || out == nullptr || bad_buf(buf, len)) return kInvalid;
      return produce<Req>(out, [&](Req** r) {
        return P::iput_notify(ep(e), buf, len, mr(m), remote, rkey(k), value, r);
      });
    });
  }
  static hmc_plugin_status_t notify_poll(hmc_net_ep_t* e, uint64_t* value) {
    return guarded([&] {
      if (e == nullptr || value == nullptr) return kInvalid;
      return P::notify_poll(ep(e), value);
    });
  }
};

}  // namespace net_detail

// The table of the plugin P, for its entry symbol to return (store it with static storage
// duration: a namespace-scope constexpr variable).
template <typename P>
constexpr hmc_net_plugin_v2_t net_table(const char* name, const char* version,
                                        const hmc_config_var_t* config_vars) {
  using S = net_detail::NetSlots<P>;
// The slot's C function where P defines it, NULL where it does not (never naming it then, so
// that the adaptor's function for it is not instantiated).
#define HMC_NET_ADAPTOR_SLOT(name)                     \
  [] {                                                 \
    if constexpr (net_detail::has_##name<P>)           \
      return &S::name;                                 \
    else                                               \
      return static_cast<decltype(&S::name)>(nullptr); \
  }()
  return hmc_net_plugin_v2_t{
      HMC_NET_ABI_HEADER_INIT(hmc_net_plugin_v2_t),
      name,
      version,
      config_vars,
      S::init,
      S::finalize,
      S::device_count,
      S::device_props,
      S::listen,
      S::accept,
      S::close_listener,
      S::connect,
      S::ep_ready,
      S::close_ep,
      S::test,
      HMC_NET_ADAPTOR_SLOT(reg_mr),
      HMC_NET_ADAPTOR_SLOT(dereg_mr),
      HMC_NET_ADAPTOR_SLOT(isend),
      HMC_NET_ADAPTOR_SLOT(irecv),
      HMC_NET_ADAPTOR_SLOT(rkey_unpack),
      HMC_NET_ADAPTOR_SLOT(rkey_release),
      HMC_NET_ADAPTOR_SLOT(iput),
      HMC_NET_ADAPTOR_SLOT(iget),
      HMC_NET_ADAPTOR_SLOT(cancel),
      HMC_NET_ADAPTOR_SLOT(progress),
      HMC_NET_ADAPTOR_SLOT(wait_fd),
      HMC_NET_ADAPTOR_SLOT(arm),
      HMC_NET_ADAPTOR_SLOT(connect_hello),
      HMC_NET_ADAPTOR_SLOT(accept_hello),
      HMC_NET_ADAPTOR_SLOT(iflush),
      HMC_NET_ADAPTOR_SLOT(iput_v),
      HMC_NET_ADAPTOR_SLOT(iget_v),
      HMC_NET_ADAPTOR_SLOT(iput_notify),
      HMC_NET_ADAPTOR_SLOT(notify_poll),
  };
#undef HMC_NET_ADAPTOR_SLOT
}

}  // namespace hmc::plugin

#endif /* HMC_PLUGIN_NET_ADAPTOR_HPP */
