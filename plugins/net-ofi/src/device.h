// One opened provider/domain: fabric, domain, completion queue, address vector and the single
// RDM endpoint that serves every peer of this device. It owns every request posted through it,
// drives progress (completion queue, then the backlog of posts that met -FI_EAGAIN), hands out
// receive slots (wire.h), and registers memory the way the provider's mr_mode asks.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "discover.h"
#include "fid.h"
#include "hmc/plugin/net.h"
#include "log.h"
#include "mr_cache.h"
#include "request.h"

namespace hmc::ofi {

class Context;
class Listener;

// A remote endpoint address inserted into the address vector, shared by every connection to
// that endpoint, with the receive slots those connections hold.
struct AvEntry {
  std::string addr;  // raw fi_getname bytes of the remote endpoint
  fi_addr_t fi_addr = FI_ADDR_NOTAVAIL;
  int refs = 0;        // connections using it
  uint16_t slots = 0;  // receive slots in use towards it (directed receive)
  int next_slot = 0;   // round robin, so a closed connection's slot is reused last
};

class Device {
 public:
  Device(Context& ctx, int index, DeviceChoice choice);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // Opens fabric, domain, CQ, AV and the endpoint. Logs what failed.
  hmc_plugin_status_t open();

  Context& ctx() const { return ctx_; }
  const Log& log() const;
  int index() const { return index_; }
  const std::string& name() const { return choice_.name; }
  const char* provider() const { return choice_.info->fabric_attr->prov_name; }
  bool rma() const { return choice_.rma; }
  // Messages go through the plugin's protocol (wire.h: eager bounce, rendezvous read), which
  // needs RMA; without it they are plain tagged messages and truncation is the provider's.
  bool protocol() const { return choice_.rma; }
  size_t eager_limit() const { return eager_limit_; }
  bool directed() const { return choice_.directed; }
  bool same_host() const;
  bool virt_addr() const { return (mr_mode_ & FI_MR_VIRT_ADDR) != 0; }
  // Puts are followed by an ordered 1-byte read instead of asking for delivery completion.
  bool read_completion() const { return read_completion_; }
  uint64_t mem_ifaces() const { return choice_.mem_ifaces; }
  fid_ep* ep() const { return ep_.get(); }
  const std::vector<uint8_t>& address() const { return address_; }
  int wait_fd() const { return wait_fd_; }
  void fill_props(hmc_net_device_props_t* props) const;

  // Reads completions and posts what waits in the backlog. Bounded work per call.
  void progress();
  // True when sleeping on wait_fd is safe (fi_trywait agreed and nothing is queued).
  bool trywait();
  // Operations in the provider, queued posts or listeners: work that a device without a wait
  // fd must be polled for.
  bool busy() const { return in_provider_total_ > 0 || queued_ > 0 || !listeners_.empty(); }

  // --- address vector and slots ---
  AvEntry* av_acquire(const std::vector<uint8_t>& addr, std::string* why);
  void av_release(AvEntry* e);
  // A receive slot unique towards e (directed receive) or in the device; -1 when none is free.
  int slot_acquire(AvEntry* e);
  void slot_release(AvEntry* e, int slot);

  // --- requests ---
  Request* new_request(ReqKind kind);
  // Frees a request that is not inside the provider and not queued.
  void release(Request* r);
  // Posts r, or queues it behind earlier queued posts of its endpoint (or when the provider
  // answers -FI_EAGAIN even after one round of progress). On failure nothing was posted and the
  // caller still owns r; the status says why (logged).
  hmc_plugin_status_t submit(Request* r);
  // Queues r's next post behind its endpoint's queue, for the next progress call.
  void defer(Request* r);
  void unqueue(Request* r);
  // The parts of r not posted yet never will be; r ends with err once its posted parts do.
  void abandon_unposted(Request* r, int err) {
    if (r->first_error == 0) r->first_error = err;
    r->posted_parts = parts(r);
  }
  // The endpoint closes: it leaves the list of endpoints with queued posts.
  void forget_queue(Endpoint* ep);
  // fi_cancel on the request's posted receive part (a matching receive, a rendezvous send's
  // FIN receive, a hello or ack receive); true when libfabric accepted the cancellation.
  bool cancel_posted(Request* r);
  uint64_t next_cookie();
  // The request's endpoint is gone: the device frees it when its completions arrive.
  void adopt_orphan(Request* r);
  size_t orphans() const { return orphans_; }

  // --- memory ---
  // A local descriptor for [buf, buf+len) into r->desc (and r->cached), when the provider
  // needs one; mr_desc is the descriptor of the caller's registration, if any.
  hmc_plugin_status_t local_desc(const void* buf, size_t len, void* mr_desc, Request* r);
  bool needs_local_desc() const { return needs_local_desc_; }
  // Registers memory with this domain the way mr_mode asks (keys, endpoint binding, iface).
  bool register_memory(void* addr, size_t len, uint64_t access, uint32_t iface, int ordinal,
                       fid_mr** out, std::string* why);
  bool register_local(void* addr, size_t len, fid_mr** out, std::string* why) {
    return register_memory(addr, len, FI_SEND | FI_RECV | FI_READ | FI_WRITE, HMC_MEM_IFACE_HOST,
                           -1, out, why);
  }
  // Registers the first len bytes of r's user buffer for the peer's part of a rendezvous
  // (FI_REMOTE_READ or FI_REMOTE_WRITE); r->own_mr, r->remote_addr and r->key describe it.
  hmc_plugin_status_t register_rndv(Request* r, size_t len, uint64_t access);
  // Large messages move by the receiver's fi_read (false) or by the sender's fi_write into
  // the receiver's buffer (true; needs FI_ORDER_SAW).
  bool write_rndv() const { return write_rndv_; }
  // A write rendezvous (and a put, where writes are applied in order) moves its data in
  // fi_writes of at most this many bytes, one after another (HMC_OFI_WRITE_CHUNK).
  size_t write_chunk() const { return write_chunk_; }
  // A chunk of the bounce pool (bounce_size() bytes), and giving it back.
  Bounce bounce_get();
  void bounce_put(Bounce b);
  size_t bounce_size() const { return bounce_size_; }
  // This device's liveness word, which peers read to find out whether we are still there.
  uint64_t probe_addr() const;
  uint64_t probe_key() const { return liveness_mr_ ? fi_mr_key(liveness_mr_.get()) : 0; }
  // The landing byte of a put's trailing read, and its descriptor.
  void* scratch() { return scratch_; }
  void* scratch_desc() const { return scratch_mr_ ? fi_mr_desc(scratch_mr_.get()) : nullptr; }

  // --- listeners waiting for a hello ---
  void add_listener(Listener* l) { listeners_.insert(l); }
  void remove_listener(Listener* l) { listeners_.erase(l); }

 private:
  void drain_cq();
  void post_backlog();
  std::deque<Request*>& queue_of(Request* r);
  // One attempt at posting r's remaining parts: 0, -FI_EAGAIN, or another negative error.
  ssize_t post(Request* r);
  // Whether a failed post is to be retried later: -FI_EAGAIN, or -FI_ENOMEM while operations
  // are in the provider (shm answers it when its receive queue is full; completions free it).
  bool retry_later(ssize_t rc);
  // Whether part `part` of r (in its current phase) is a receive.
  static bool receiving_part(const Request* r, int part);
  // Whether r waits in its endpoint's receive queue (else the send queue).
  static bool queues_as_receive(const Request* r);
  ssize_t post_part(Request* r, int part);
  int parts(const Request* r) const;
  // A write rendezvous or a put: the size of the piece at r->read_off, and whether it is the
  // last.
  size_t write_piece(const Request* r) const;
  bool last_piece(const Request* r) const;
  // False while r is a write rendezvous or put whose piece just completed is not the last.
  bool last_piece_done(const Request* r) const;
  void on_completion(void* op_context, int err, size_t len, const fi_cq_err_entry* e);
  void finish(Request* r, int err);
  void finish_recv(Request* r, int err);
  hmc_plugin_status_t status_of(const Request* r, int err) const;
  void fail_queued(Request* r, ssize_t rc);
  void purge_av();

  Context& ctx_;
  int index_;
  DeviceChoice choice_;
  uint64_t mr_mode_ = 0;
  size_t key_bytes_ = 8;
  bool needs_local_desc_ = false;
  bool read_completion_ = false;
  size_t eager_limit_ = 0;
  bool saw_order_ = false;
  bool write_rndv_ = false;
  size_t write_chunk_ = SIZE_MAX;
  bool put_pieces_ = false;
  size_t bounce_size_ = 0;
  uint64_t cookie_ = 0;
  size_t in_provider_total_ = 0;
  bool in_completion_ = false;  // completions are being handled: submit must not read the CQ
  bool full_logged_ = false;    // the provider's queue was reported full once

  Fid<fid_fabric> fabric_;
  Fid<fid_domain> domain_;
  Fid<fid_cq> cq_;
  Fid<fid_av> av_;
  Fid<fid_ep> ep_;
  Fid<fid_mr> scratch_mr_;
  uint8_t scratch_[64] = {};
  Fid<fid_mr> liveness_mr_;
  uint64_t liveness_[8] = {};
  int wait_fd_ = -1;
  std::vector<uint8_t> address_;

  std::unique_ptr<MrCache> cache_;
  struct Slab {
    uint8_t* mem = nullptr;
    fid_mr* mr = nullptr;
  };
  std::vector<Slab> slabs_;
  std::vector<Bounce> bounce_free_;
  std::unordered_set<Request*> live_;  // every request of this device, freed at the end
  // Posts the provider refused for now wait in their endpoint's queues (Endpoint::rx_queue_,
  // tx_queue_), in post order, so a peer that stopped taking operations holds up nobody else;
  // queued_eps_ lists the endpoints with anything queued. Requests without an endpoint (a
  // listener's hello receive) queue here.
  std::vector<Endpoint*> queued_eps_;
  std::deque<Request*> dev_queue_;
  size_t queued_ = 0;
  size_t orphans_ = 0;
  std::map<std::string, std::unique_ptr<AvEntry>> av_map_;
  bool av_purge_pending_ = false;
  uint16_t device_slots_ = 0;  // slots in use without directed receive
  int device_next_slot_ = 0;
  std::unordered_set<Listener*> listeners_;
  bool cq_error_logged_ = false;
};

}  // namespace hmc::ofi
