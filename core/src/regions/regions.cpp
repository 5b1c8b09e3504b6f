// The regions subsystem: memory registration with every net device that registers memory
// (net/registration.cpp does one), the import of a peer's descriptor as an rkey on that peer's
// data endpoint, and the withdrawal of a region from the peers that imported it before it is
// deregistered.
//
// Withdrawal protocol (control-plane messages, payloads in peer/messages.h):
//  - hmc_remote_import of a descriptor that carries the owner's ids (every owner that has this
//    code packs them) sends RegionRequest {token, ids, base, size, access} to the owner and waits
//    (HMC_TIMEOUT_MS) for RegionReply. The owner answers from its own record: status 0 when the
//    region is registered and the descriptor matches it exactly (else HMC_ERR_REMOTE, and the
//    import fails: a deregistered region or a forged descriptor is refused here), and counts the
//    import. hmc_remote_release sends RegionRelease, which uncounts it.
//  - hmc_mem_deregister marks the region departing (later RegionRequests are refused), sends
//    RegionGone to every peer that holds a counted import, and drives progress until each
//    answered RegionGoneAck, released its imports, or is lost or closed, at most HMC_TIMEOUT_MS.
//    A peer that did not answer by then is declared lost (the path to it is closed: it can no
//    longer be trusted to stay off the memory). Then the plugins' registrations end. A region
//    nobody imported costs no message and no wait.
//  - An importer receiving RegionGone marks its Remotes of the region dead under the net mutex
//    (hmc_put/hmc_get on them fail at once with HMC_ERR_REMOTE, as a refusal by the owner does on
//    paths where the owner checks) and answers RegionGoneAck once none of their operations is
//    running (a put ends when its data is in place at the owner, a get when its data arrived),
//    so nothing touches the memory after hmc_mem_deregister returned.
// Why RegionRequest comes first: a descriptor in flight while its region is deregistered would
// otherwise reach an importer the owner does not know of; with the question answered before
// hmc_remote_import returns, the owner either counted the import (and will withdraw it) or
// refused it. Messages on one control connection arrive in order, so a RegionGone never
// overtakes the RegionReply that counted the import.
// Compatibility: an owner built before these messages packs no ids (the ids are appended to the
// descriptor, and readers of version 1 ignore trailing bytes), so no importer asks it anything;
// an importer built before them ignores the ids, never asks, so it is in no importer list and
// never gets RegionGone. Every message goes only to a peer that sent one first or packed the
// ids, so the new types reach only peers that know them (an unknown type fails the control
// stream: control/frame.h). Remotes of an old owner's descriptors are not tracked, as before.
// Staged regions (device memory no net plugin reaches) have no plugin registration: peers reach
// them through StagedPut/StagedGet (xfer/target_staging.cpp has that protocol). Deregistering one
// first waits for the transfers the owner runs on it (RegionServices::settle_staged_region), new
// asks being refused as the region is departing, then withdraws it from its importers as above.
// Locks: proto_mutex_ is a leaf (a control handler holds a ctrl_mutex when it takes it);
// messages are sent with the peer's ctrl_mutex, taken after the net and regions mutexes.
#include "regions/regions.h"

#include <algorithm>

#include "net/registration.h"
#include "peer/dispatch.h"
#include "peer/messages.h"
#include "peer/peer.h"
#include "request/request.h"
#include "util/clock.h"
#include "util/handles.h"
#include "util/log.h"
#include "util/status.h"

namespace hmc {

namespace {
// A peer that will not take part any more: its imports count as withdrawn.
bool peer_gone(const Peer& p) {
  return p.lost || p.closed || p.remote_closed;
}

// A status from the wire: an hmc error, or HMC_ERR_REMOTE for values this build does not know.
hmc_status_t wire_status(int32_t v) {
  return v < 0 && v >= HMC_ERR_INTERNAL ? static_cast<hmc_status_t>(v) : HMC_ERR_REMOTE;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}
}  // namespace

Regions::Regions(RegionServices& services, DeviceRegistry& devices,
                 const std::vector<std::unique_ptr<NetPlugin>>& nets, const Settings& settings)
    : services_(services), devices_(devices), nets_(nets), settings_(settings) {}

void Regions::add_handlers(ControlDispatch& dispatch) {
  for (auto type : {control::MsgType::RegionRequest, control::MsgType::RegionReply,
                    control::MsgType::RegionRelease, control::MsgType::RegionGone,
                    control::MsgType::RegionGoneAck})
    dispatch.add(type,
                 [this](const std::shared_ptr<Peer>& peer, const control::Channel::Message& m) {
                   return handle_message(peer, m);
                 });
}

hmc_status_t Regions::register_memory(void* addr, size_t size, uint32_t access, Region** out) {
  MemoryLocation loc = devices_.locate(addr);
  if (loc.size && reinterpret_cast<uintptr_t>(addr) - loc.base + size > loc.size)
    return fail(HMC_ERR_OUT_OF_BOUNDS,
                "hmc_mem_register: {} bytes at {} overrun its {}-byte "
                "allocation",
                size, addr, loc.size);
  auto region = std::make_unique<Region>();
  region->ctx = settings_.owner;
  region->addr = addr;
  region->size = size;
  region->access = access;
  region->context_id = settings_.context_id;
  const Device& dev = *loc.device;
  // Device memory is also served by target-side staging (xfer/target_staging.h), for peers whose
  // path has no registration of it; the descriptor says so.
  region->staged = !dev.is_host();
  DmabufExport dmabuf;
  std::vector<std::string> direct, staged;
  for (auto& net : nets_) {
    if (!HMC_NET_SLOT(net->table(), reg_mr)) continue;
    for (auto& nd : net->devices()) {
      std::string why;
      DirectWay way;
      if (register_with(nd, addr, size, access, loc, settings_.dmabuf, &dmabuf, region.get(), &why,
                        &way))
        direct.push_back(nd.key() + (way == DirectWay::kPeermem ? direct_way_text(way) : ""));
      else if (!why.empty())
        staged.push_back(nd.key() + " (" + why + ")");
    }
  }
  if (region->staged)
    HMC_LOG_I("hmc_mem_register: {} bytes at {} on {}: {}{}{}", size, addr, dev.name,
              direct.empty() ? "" : "direct on " + join(direct, ", "),
              direct.empty() || staged.empty() ? "" : "; ",
              staged.empty() ? "" : "staged for " + join(staged, ", "));
  Region* r = region.release();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    regions_.insert(r);
  }
  {
    std::lock_guard<std::mutex> lock(proto_mutex_);
    r->id = next_region_id_++;
    regions_by_id_[r->id] = r;
  }
  Handles::add(r, HandleKind::Region);
  *out = r;
  return HMC_SUCCESS;
}

hmc_status_t Regions::deregister_memory(Region* region) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    regions_.erase(region);
  }
  Handles::remove(region);
  bool imported = false;
  {
    std::lock_guard<std::mutex> lock(proto_mutex_);
    region->departing = true;
    for (auto& imp : region->importers) {
      if (imp.count == 0 || peer_gone(*imp.peer)) continue;
      imp.told = true;
      imported = true;
    }
    if (!imported && !region->staged) regions_by_id_.erase(region->id);
  }
  // A staged region: the transfers our progress engine runs into or out of it end first (new
  // asks are refused from now on: it is departing); their initiators' requests end with them.
  if (region->staged) services_.settle_staged_region(region);
  if (imported) {
    withdraw(region);
  } else if (region->staged) {
    std::lock_guard<std::mutex> lock(proto_mutex_);
    regions_by_id_.erase(region->id);
  }
  for (auto& reg : region->registrations) {
    NetPlugin& net = *reg.dev->plugin;
    std::lock_guard<std::mutex> lock(net.mutex());
    hmc_plugin_status_t ps = net.table()->dereg_mr(net.ctx(), reg.mr);
    if (ps != HMC_PLUGIN_SUCCESS)
      HMC_LOG_W("net plugin {}: dereg_mr on {} failed: {}", net.name(), reg.dev->name,
                plugin_status_string(ps));
  }
  delete region;
  return HMC_SUCCESS;
}

void Regions::withdraw(Region* region) {
  const uint64_t t0 = now_ns();
  std::vector<std::shared_ptr<Peer>> told;
  {
    std::lock_guard<std::mutex> lock(proto_mutex_);
    for (auto& imp : region->importers)
      if (imp.told) told.push_back(imp.peer);
  }
  for (auto& p : told) {
    hmc_status_t st = HMC_SUCCESS;
    std::string why;
    {
      std::lock_guard<std::mutex> lock(p->ctrl_mutex);
      if (p->ctrl && !p->lost) {
        control::Writer w;
        msg::encode_region_id(region->id, &w);
        st = p->ctrl->send(control::MsgType::RegionGone, w);
        if (st != HMC_SUCCESS) why = last_error();
      }
    }
    // Its control connection broke: it is lost, which withdraws the region from it.
    if (st != HMC_SUCCESS) services_.fail_peer(*p, HMC_ERR_PEER_LOST, "control connection: " + why);
  }
  auto waiting = [&](const Region::Importer& imp) {
    return imp.told && !imp.acked && imp.count > 0 && !peer_gone(*imp.peer);
  };
  auto settled = [&] {
    std::lock_guard<std::mutex> lock(proto_mutex_);
    for (const auto& imp : region->importers)
      if (waiting(imp)) return false;
    return true;
  };
  bool done = services_.progress_until(settled, t0 + uint64_t(settings_.timeout_ms) * 1000000);
  std::vector<std::shared_ptr<Peer>> laggards;
  {
    std::lock_guard<std::mutex> lock(proto_mutex_);
    regions_by_id_.erase(region->id);
    if (!done)
      for (const auto& imp : region->importers)
        if (waiting(imp)) laggards.push_back(imp.peer);
  }
  for (auto& p : laggards) {
    // fail_peer logs it, once.
    services_.fail_peer(
        *p, HMC_ERR_PEER_LOST,
        fmt::format("hmc_mem_deregister: it did not acknowledge the withdrawal of region {} "
                    "({} bytes at {}) within {} ms (HMC_TIMEOUT_MS); its connection is "
                    "closed so that it cannot reach the memory any more",
                    region->id, region->size, region->addr, settings_.timeout_ms));
  }
  HMC_LOG_D("hmc_mem_deregister: region {} withdrawn from {} peer(s) in {} us", region->id,
            told.size(), (now_ns() - t0) / 1000);
}

hmc_status_t Regions::import_remote(const std::shared_ptr<Peer>& peer, const void* desc, size_t len,
                                    Remote** out) {
  PackedRegion packed;
  hmc_status_t st = unpack_region(desc, len, &packed);
  if (st != HMC_SUCCESS) return st;
  const bool tracked = packed.region_id != 0;
  if (tracked && packed.context_id != peer->remote.context_id)
    return fail(HMC_ERR_INVALID_ARGUMENT,
                "hmc_remote_import: the descriptor is of a region of context {:016x}, but peer {} "
                "is context {:016x}: a descriptor is imported through the peer that packed it",
                packed.context_id, peer->name, peer->remote.context_id);
  auto remote = std::make_unique<Remote>();
  remote->peer = peer;
  remote->base = packed.base;
  remote->size = packed.size;
  remote->access = packed.access;
  remote->region_id = packed.region_id;
  NetPlugin& net = *peer->net;
  // The owner registered the region per net device: the key is that of its end of our path
  // (another name than ours where the two pair by fabric).
  const std::string& owner_device =
      peer->choice.peer_device.empty() ? peer->choice.device : peer->choice.peer_device;
  const std::vector<uint8_t>* key =
      peer->net_device ? packed.key_for(net.name(), owner_device) : nullptr;
  // Device memory without a key for our path is reached by target-side staging.
  remote->staged = !key && (packed.flags & kRegionFlagStaged) && packed.region_id;
  remote->device = key && (packed.flags & kRegionFlagStaged);
  {
    std::lock_guard<std::mutex> lock(net.mutex());
    if (peer->lost || !peer->ep)
      return fail(HMC_ERR_PEER_LOST, "hmc_remote_import: peer {} is lost", peer->name);
    if (key && HMC_NET_SLOT(net.table(), rkey_unpack)) {
      hmc_plugin_status_t ps =
          net.table()->rkey_unpack(peer->ep, key->data(), key->size(), &remote->rkey);
      if (ps != HMC_PLUGIN_SUCCESS)
        return fail(from_plugin_status(ps),
                    "hmc_remote_import: {} rejected the descriptor's key: {}", net.name(),
                    plugin_status_string(ps));
    }
    // Without a key for our path the handle is still made: hmc_put/hmc_get then say why not.
    // In remotes_ before the owner is asked, so that a RegionGone that follows its answer finds
    // it.
    std::lock_guard<std::mutex> rlock(mutex_);
    remotes_.insert(remote.get());
  }
  if (tracked) {
    // The owner checks the descriptor against its record and counts the import.
    uint64_t token;
    {
      std::lock_guard<std::mutex> lock(proto_mutex_);
      token = next_import_token_++;
      import_waits_[token] = ImportWait{};
    }
    msg::RegionRequest q;
    q.token = token;
    q.context_id = packed.context_id;
    q.region_id = packed.region_id;
    q.base = packed.base;
    q.size = packed.size;
    q.access = packed.access;
    std::string why = "it is lost or closed";
    bool asked = false;
    {
      std::lock_guard<std::mutex> lock(peer->ctrl_mutex);
      if (peer->ctrl && !peer_gone(*peer)) {
        control::Writer w;
        msg::encode_region_request(q, &w);
        asked = peer->ctrl->send(control::MsgType::RegionRequest, w) == HMC_SUCCESS;
        if (!asked) why = last_error();
      }
    }
    auto answered = [&] {
      std::lock_guard<std::mutex> lock(proto_mutex_);
      return import_waits_[token].answered || peer_gone(*peer);
    };
    if (asked)
      services_.progress_until(answered, now_ns() + uint64_t(settings_.timeout_ms) * 1000000);
    ImportWait answer;
    {
      // A reply arriving after this finds no token and releases the import it counted.
      std::lock_guard<std::mutex> lock(proto_mutex_);
      answer = std::move(import_waits_[token]);
      import_waits_.erase(token);
    }
    if (!answer.answered || answer.status != 0 || remote->dead) {
      if (!asked)
        st = fail(HMC_ERR_PEER_LOST,
                  "hmc_remote_import: could not ask peer {} about the region: {}", peer->name, why);
      else if (answer.answered && answer.status != 0)
        st = fail(wire_status(answer.status),
                  "hmc_remote_import: peer {} refused the descriptor: {}", peer->name, answer.text);
      else if (answer.answered)
        st = fail(HMC_ERR_REMOTE,
                  "hmc_remote_import: peer {} deregistered the region while it was "
                  "being imported",
                  peer->name);
      else if (peer->closed)
        st = fail(HMC_ERR_INVALID_HANDLE, "hmc_remote_import: the peer was closed");
      else if (peer_gone(*peer))
        st = fail(HMC_ERR_PEER_LOST,
                  "hmc_remote_import: peer {} was lost while it checked the "
                  "descriptor",
                  peer->name);
      else
        st = fail(HMC_ERR_TIMEOUT,
                  "hmc_remote_import: peer {} did not answer the descriptor check "
                  "within {} ms (HMC_TIMEOUT_MS); a peer without a progress thread answers only "
                  "while it calls into hmc",
                  peer->name, settings_.timeout_ms);
      drop_remote(remote.release(), false);  // sets no error
      return st;
    }
  }
  if (!key && !remote->staged)
    HMC_LOG_I(
        "hmc_remote_import: the descriptor has no key for {} (the path to {}); one-sided "
        "operations on it will be refused",
        net.name(), peer->name);
  Handles::add(remote.get(), HandleKind::Remote);
  *out = remote.release();
  return HMC_SUCCESS;
}

void Regions::drop_remote(Remote* remote, bool tell_owner) {
  Peer& peer = *remote->peer;
  NetPlugin& net = *peer.net;
  {
    std::lock_guard<std::mutex> lock(net.mutex());
    std::lock_guard<std::mutex> rlock(mutex_);
    remotes_.erase(remote);
    if (remote->rkey && HMC_NET_SLOT(net.table(), rkey_release))
      net.table()->rkey_release(remote->rkey);
    remote->rkey = nullptr;
  }
  // A withdrawn region is no longer counted by its owner; a lost peer's imports count for nothing.
  if (tell_owner && remote->region_id && !remote->dead) {
    std::lock_guard<std::mutex> lock(peer.ctrl_mutex);
    if (peer.ctrl && !peer_gone(peer)) {
      control::Writer w;
      msg::encode_region_id(remote->region_id, &w);
      peer.ctrl->send(control::MsgType::RegionRelease,
                      w);  // a broken channel: service_control's business
    }
  }
  delete remote;
}

hmc_status_t refuse_withdrawn(const Remote& r, const char* what) {
  return fail(HMC_ERR_REMOTE,
              "hmc_{} with {}: the peer deregistered the region ({} bytes at "
              "0x{:x}); its descriptor grants no access any more",
              what, r.peer->name, r.size, r.base);
}

hmc_status_t Regions::release_remote(Remote* remote) {
  Handles::remove(remote);
  drop_remote(remote, true);
  return HMC_SUCCESS;
}

std::string Regions::handle_message(const std::shared_ptr<Peer>& peer,
                                    const control::Channel::Message& m) {
  const uint8_t* p = m.payload.data();
  size_t n = m.payload.size();
  auto send = [&](control::MsgType type, const control::Writer& w) -> std::string {
    if (!peer->ctrl) return "control connection closed";
    if (peer->ctrl->send(type, w) != HMC_SUCCESS) return "control connection: " + last_error();
    return "";
  };
  switch (m.type) {
    case control::MsgType::RegionRequest: {  // we own the region
      msg::RegionRequest q;
      if (!msg::decode_region_request(p, n, &q)) return "malformed RegionRequest";
      msg::RegionReply a;
      a.token = q.token;
      a.region_id = q.region_id;
      {
        std::lock_guard<std::mutex> lock(proto_mutex_);
        auto it = regions_by_id_.find(q.region_id);
        Region* r = it == regions_by_id_.end() ? nullptr : it->second;
        if (q.context_id != settings_.context_id) {
          a.text = fmt::format("the descriptor names context {:016x}, this is context {:016x}",
                               q.context_id, settings_.context_id);
        } else if (!r || r->departing) {
          a.text = fmt::format("region {} ({} bytes at 0x{:x}) is not registered (any more)",
                               q.region_id, q.size, q.base);
        } else if (q.base != reinterpret_cast<uint64_t>(r->addr) || q.size != r->size ||
                   q.access != r->access) {
          a.text = fmt::format(
              "the descriptor of region {} claims {} bytes at 0x{:x} with access "
              "0x{:x}; {} bytes at {} with access 0x{:x} were registered",
              q.region_id, q.size, q.base, q.access, r->size, r->addr, r->access);
        } else {
          auto imp = std::find_if(r->importers.begin(), r->importers.end(),
                                  [&](const Region::Importer& i) { return i.peer == peer; });
          if (imp == r->importers.end()) imp = r->importers.insert(imp, Region::Importer{peer});
          ++imp->count;
        }
      }
      a.status = a.text.empty() ? 0 : HMC_ERR_REMOTE;
      if (a.status)
        HMC_LOG_I("peer {} imported a descriptor that is refused: {}", peer->name, a.text);
      control::Writer w;
      msg::encode_region_reply(a, &w);
      return send(control::MsgType::RegionReply, w);
    }
    case control::MsgType::RegionReply: {  // we import
      msg::RegionReply a;
      if (!msg::decode_region_reply(p, n, &a)) return "malformed RegionReply";
      bool abandoned = false;
      {
        std::lock_guard<std::mutex> lock(proto_mutex_);
        auto it = import_waits_.find(a.token);
        if (it == import_waits_.end()) {
          abandoned = a.status == 0;
        } else {
          it->second.answered = true;
          it->second.status = a.status;
          it->second.text = std::move(a.text);
        }
      }
      if (!abandoned) return "";
      // The import that asked gave up waiting: uncount it.
      control::Writer w;
      msg::encode_region_id(a.region_id, &w);
      return send(control::MsgType::RegionRelease, w);
    }
    case control::MsgType::RegionRelease:
    case control::MsgType::RegionGoneAck: {  // we own the region
      uint64_t id = 0;
      if (!msg::decode_region_id(p, n, &id)) return "malformed region message";
      std::lock_guard<std::mutex> lock(proto_mutex_);
      auto it = regions_by_id_.find(id);
      if (it == regions_by_id_.end()) return "";  // already gone: nothing to count
      for (auto& imp : it->second->importers) {
        if (imp.peer != peer) continue;
        if (m.type == control::MsgType::RegionGoneAck)
          imp.acked = true;
        else if (imp.count > 0)
          --imp.count;
      }
      return "";
    }
    case control::MsgType::RegionGone: {  // we import; acknowledged by settle_withdrawals
      uint64_t id = 0;
      if (!msg::decode_region_id(p, n, &id)) return "malformed RegionGone";
      std::lock_guard<std::mutex> lock(proto_mutex_);
      withdrawals_.push_back({peer, id});
      withdrawals_pending_.store(true, std::memory_order_release);
      return "";
    }
    default: return "";
  }
}

bool Regions::settle_withdrawals() {
  // (progress() runs TargetStaging::advance first: staged requests end before the withdrawals that
  // wait for them.)
  bool busy = false;
  if (!withdrawals_pending_.load(std::memory_order_acquire)) return busy;
  std::vector<Withdrawal> work, later;
  {
    std::lock_guard<std::mutex> lock(proto_mutex_);
    work.swap(withdrawals_);
    withdrawals_pending_.store(false, std::memory_order_relaxed);
  }
  bool sent = false;
  for (auto& wd : work) {
    std::shared_ptr<Peer> owner = wd.peer.lock();
    if (!owner || peer_gone(*owner) || !owner->net) continue;  // nobody waits for us any more
    Peer& peer = *owner;
    size_t remotes = 0;
    bool running = false;
    {
      std::lock_guard<std::mutex> lock(peer.net->mutex());
      std::lock_guard<std::mutex> rlock(mutex_);
      for (Remote* r : remotes_) {
        if (r->peer != owner || r->region_id != wd.region_id) continue;
        // Under the net mutex: a post either ran before (its request is in inflight) or sees it.
        r->dead.store(true);
        running |= remote_busy_locked(r);
        ++remotes;
      }
    }
    if (running) {
      later.push_back(std::move(wd));
      continue;
    }
    std::lock_guard<std::mutex> lock(peer.ctrl_mutex);
    if (peer.ctrl && !peer.lost) {
      control::Writer w;
      msg::encode_region_id(wd.region_id, &w);
      peer.ctrl->send(control::MsgType::RegionGoneAck, w);  // a broken channel: service_control's
      sent = true;
      HMC_LOG_D(
          "peer {} withdrew its region {}: {} remote handle(s) of it refuse access from now "
          "on",
          peer.name, wd.region_id, remotes);
    }
  }
  if (!later.empty()) {
    std::lock_guard<std::mutex> lock(proto_mutex_);
    for (auto& wd : later) withdrawals_.push_back(std::move(wd));
    withdrawals_pending_.store(true, std::memory_order_release);
  }
  return sent || busy;
}

void Regions::release_keys_locked(const Peer& peer) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Remote* r : remotes_) {
    if (r->peer.get() == &peer && r->rkey) {
      if (HMC_NET_SLOT(peer.net->table(), rkey_release)) peer.net->table()->rkey_release(r->rkey);
      r->rkey = nullptr;
    }
  }
}

hmc_net_mr_t* Regions::registration_covering(const NetDevice* nd, const void* buf, size_t size) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(buf);
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Region* r : regions_) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(r->addr);
    if (a < base || a - base > r->size || size > r->size - (a - base)) continue;
    if (const Region::Registration* reg = r->registration_on(nd)) return reg->mr;
  }
  return nullptr;
}

void Regions::release_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Remote* r : remotes_) {  // their keys went with their peers
    Handles::remove(r);
    delete r;
  }
  remotes_.clear();
  for (Region* r : regions_) {  // no other thread runs any more: no plugin lock needed
    for (auto& reg : r->registrations)
      reg.dev->plugin->table()->dereg_mr(reg.dev->plugin->ctx(), reg.mr);
    Handles::remove(r);
    delete r;
  }
  regions_.clear();
}

Region* Regions::find_locked(uint64_t region_id) const {
  auto it = regions_by_id_.find(region_id);
  return it == regions_by_id_.end() ? nullptr : it->second;
}

void track_remote_request_locked(Remote* r, hmc_request_t req) {
  if (r->inflight.size() >= r->prune_at) {
    remote_busy_locked(r);
    r->prune_at = std::max<size_t>(16, 2 * r->inflight.size());
  }
  r->inflight.push_back(req);
}

bool remote_busy_locked(Remote* r) {
  auto& v = r->inflight;
  // A handle names a slot and its generation: lookup answers nullptr once the request was
  // released, so a slot reused by a later request is not mistaken for this one.
  v.erase(std::remove_if(v.begin(), v.end(),
                         [](hmc_request_t h) {
                           Request* req = RequestTable::lookup(h);
                           return !req || req->done.load(std::memory_order_acquire);
                         }),
          v.end());
  return !v.empty() || r->posting.load() > 0;
}

}  // namespace hmc
