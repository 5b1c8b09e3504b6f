#include "context/context.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "control/frame.h"
#include "control/socket.h"
#include "device/copy.h"
#include "device/stage_pool.h"
#include "net/registration.h"
#include "peer/dispatch.h"
#include "peer/messages.h"
#include "util/clock.h"
#include "util/handles.h"
#include "util/hot.h"
#include "util/log.h"
#include "util/random.h"
#include "util/status.h"

namespace hmc {

namespace {

// The address peers on other hosts should dial when we listen on every interface.
std::string first_external_ipv4() {
  struct ifaddrs* list = nullptr;
  std::string found = "127.0.0.1";
  if (getifaddrs(&list) != 0) return found;
  for (auto* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN];
    auto* sin = reinterpret_cast<struct sockaddr_in*>(i->ifa_addr);
    if (!inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof buf)) continue;
    if (strncmp(buf, "127.", 4) == 0) continue;
    found = buf;
    break;
  }
  freeifaddrs(list);
  return found;
}
}  // namespace

hmc_status_t Context::create(const hmc_context_options_t* opts, std::unique_ptr<Context>* out) {
  std::unique_ptr<Context> ctx(new Context());
  hmc_status_t st = ctx->init(opts);
  if (st != HMC_SUCCESS) return st;
  *out = std::move(ctx);
  return HMC_SUCCESS;
}

hmc_status_t Context::init(const hmc_context_options_t* opts) {
  created_ns_ = now_ns();
  hmc_status_t st = config_.load_from_environment();
  if (st != HMC_SUCCESS) return st;
  int level = HMC_LOG_WARN;
  log::parse_level(config_.get("HMC_LOG_LEVEL"), &level);
  std::string err;
  if (!log::configure(level, config_.get("HMC_LOG_FILE"), &err))
    return set_error(HMC_ERR_CONFIG, err);

  timeout_ms_ = static_cast<int>(std::min<int64_t>(config_.get_int("HMC_TIMEOUT_MS"), INT32_MAX));
  if (timeout_ms_ <= 0) return fail(HMC_ERR_CONFIG, "HMC_TIMEOUT_MS must be at least 1");
  heartbeat_ms_ =
      static_cast<int>(std::min<int64_t>(config_.get_int("HMC_HEARTBEAT_MS"), INT32_MAX));
  if (heartbeat_ms_ <= 0) return fail(HMC_ERR_CONFIG, "HMC_HEARTBEAT_MS must be at least 1");
  // A peer silent for HMC_TIMEOUT_MS with work outstanding is declared lost: an idle peer's
  // heartbeats come at least four times within it, however the two are set.
  heartbeat_ms_ = std::max(1, std::min(heartbeat_ms_, timeout_ms_ / 4));
  // A connector's hello may take at most this long; the default timeout caps it.
  const int64_t handshake_ms = config_.get_int("HMC_HANDSHAKE_TIMEOUT_MS");
  if (handshake_ms <= 0) return fail(HMC_ERR_CONFIG, "HMC_HANDSHAKE_TIMEOUT_MS must be at least 1");
  const int handshake_timeout_ms = static_cast<int>(std::min<int64_t>(handshake_ms, timeout_ms_));
  const int64_t max_pending = config_.get_int("HMC_MAX_PENDING_HANDSHAKES");
  if (max_pending < 1 || max_pending > 65536)
    return fail(HMC_ERR_CONFIG, "HMC_MAX_PENDING_HANDSHAKES={} is out of range: 1 to 65536",
                max_pending);
  auth_token_ = config_.get("HMC_AUTH_TOKEN");
  forced_path_ = config_.get("HMC_PATH");
  use_progress_thread_ = config_.get_bool("HMC_PROGRESS_THREAD");
  wait_spin_us_ = config_.get_int("HMC_WAIT_SPIN_US");
  if (wait_spin_us_ > 60000000)
    return fail(HMC_ERR_CONFIG, "HMC_WAIT_SPIN_US={} is out of range: 0 to 60000000",
                wait_spin_us_);
  std::string host = config_.get("HMC_LISTEN_HOST");
  int64_t port = config_.get_int("HMC_LISTEN_PORT");
  if (port > 65535)
    return fail(HMC_ERR_CONFIG, "HMC_LISTEN_PORT={} is not a port (0..65535)", port);
  if (opts) {
    if (opts->struct_size < sizeof(hmc_context_options_t))
      return fail(HMC_ERR_INVALID_ARGUMENT,
                  "hmc_context_create: opts->struct_size is {}, expected at least {}",
                  opts->struct_size, sizeof(hmc_context_options_t));
    if (opts->progress_thread >= 0) use_progress_thread_ = opts->progress_thread != 0;
    if (opts->listen_host) host = opts->listen_host;
    if (opts->listen_port) port = opts->listen_port;
  }
  if (random_bytes(&id_, sizeof id_) != HMC_SUCCESS) return HMC_ERR_SYSTEM;

  st = loader_.load(config_);
  if (st != HMC_SUCCESS) return st;
  config_.warn_unknown();

  for (plugin::Record* rec : loader_.loaded(plugin::Kind::Device))
    devices_.add_plugin(rec->device, rec->device_ctx);
  CopySettings copy_settings;
  st = CopySettings::from_config(config_, timeout_ms_, &copy_settings);
  if (st != HMC_SUCCESS) return st;
  devices_.set_copy_settings(copy_settings);
  // Framed transfers (framed/framed_transfer.h) use the registry's pool and engine; creating them
  // maps and creates nothing until the first staged byte.
  stage_chunk_ = copy_settings.stage_chunk;
  stage_env_.pool = &devices_.stage_pool();
  stage_env_.copier = &devices_.copy_engine();
  int64_t ipc_cache = config_.get_int("HMC_DEVICE_IPC_CACHE");
  if (ipc_cache < 0 || ipc_cache > 4096)
    return fail(HMC_ERR_CONFIG, "HMC_DEVICE_IPC_CACHE={} is out of range: 0 to 4096",
                config_.get("HMC_DEVICE_IPC_CACHE"));
  stage_env_.ipc_cache = static_cast<size_t>(ipc_cache);
  stage_env_.depth = static_cast<uint32_t>(copy_settings.stage_depth);
  for (plugin::Record* rec : loader_.loaded(plugin::Kind::Net)) {
    auto net = std::make_unique<NetPlugin>(rec->net, rec->net_ctx, rec->name, rec->host);
    if (net->query_devices() != HMC_SUCCESS) {
      HMC_LOG_W("{}; the plugin is not used", last_error());
      continue;
    }
    nets_.push_back(std::move(net));
  }
  if (nets_.empty())
    HMC_LOG_W(
        "no net plugin loaded: this context can allocate and copy memory but reach no peer "
        "(hmc-info shows why plugins were skipped)");
  build_capabilities();
  regions_ = std::make_unique<Regions>(
      static_cast<RegionServices&>(*this), devices_, nets_,
      Regions::Settings{this, id_, timeout_ms_, config_.get_bool("HMC_NET_DMABUF")});
  failure_.configure(regions_.get());
  staging_ = std::make_unique<TargetStaging>(static_cast<StagingServices&>(*this), transfers_,
                                             *regions_, this, timeout_ms_);
  transfers_.configure(Transfers::Settings{this, regions_.get(), staging_.get(), timeout_ms_,
                                           use_progress_thread_, wait_spin_us_});
  wire_control_handlers();

  st = start_control_plane(host, static_cast<uint16_t>(port));
  if (st != HMC_SUCCESS) return st;
  PeerConnector::Settings peer_settings;
  peer_settings.owner = this;
  peer_settings.config = &config_;
  peer_settings.loader = &loader_;
  peer_settings.nets = &nets_;
  peer_settings.caps = caps_;
  peer_settings.auth_token = auth_token_;
  peer_settings.forced_path = forced_path_;
  peer_settings.context_id = id_;
  peer_settings.timeout_ms = timeout_ms_;
  connector_ = std::make_unique<PeerConnector>(static_cast<EstablishServices&>(*this),
                                               std::move(peer_settings));
  IncomingPeers::Settings incoming_settings;
  incoming_settings.unix_listener = unix_listener_.get();
  incoming_settings.tcp_listener = tcp_listener_.get();
  incoming_settings.handshake_timeout_ms = handshake_timeout_ms;
  incoming_settings.max_pending = static_cast<size_t>(max_pending);
  incoming_ = std::make_unique<IncomingPeers>(*connector_, static_cast<IncomingServices&>(*this),
                                              incoming_settings);

  coll::Collectives::Settings coll_settings;
  coll_settings.owner = this;
  coll_settings.timeout_ms = timeout_ms_;
  std::string algo = config_.get("HMC_COLL_ALGO");
  if (!coll::parse_algorithm(algo, &coll_settings.forced) ||
      coll_settings.forced == coll::Algorithm::RecursiveHalving)
    return fail(
        HMC_ERR_CONFIG,
        "HMC_COLL_ALGO={} is not an algorithm of this build (ring, "
        "recursive_doubling, pairwise, tree, linear, hierarchical, direct; empty: chosen by "
        "size)",
        algo);
  coll_settings.self.address = address();
  coll_settings.self.context_id = id_;
  coll_settings.self.pid = getpid();
  coll_settings.self.host_id = caps_.host_id;
  coll_settings.self.vendor = "host";
  for (const Device& d : devices_.devices()) {
    if (d.is_host()) continue;
    coll_settings.self.vendor = d.plugin_name;
    break;
  }
  std::string backend = config_.get("HMC_COLL_BACKEND");
  if (!coll::parse_backend(backend, &coll_settings.backend))
    return fail(HMC_ERR_CONFIG, "HMC_COLL_BACKEND={} is not one of auto, hmc, ccl", backend);
  for (plugin::Record* rec : loader_.loaded(plugin::Kind::Ccl)) {
    if (rec->device_count == 0) continue;  // hmc-info says why
    coll::CclPlugin p;
    p.table = rec->ccl;
    p.ctx = rec->ccl_ctx;
    p.name = rec->name;
    p.library = rec->library;
    for (const Device& d : devices_.devices())
      if (!d.is_host() && d.mem_iface == int(rec->ccl->mem_iface)) {
        p.vendor = d.plugin_name;
        break;
      }
    if (p.vendor.empty()) {
      HMC_LOG_I("ccl plugin '{}' is not used: no device plugin here serves memory interface {}",
                rec->name, rec->ccl->mem_iface);
      continue;
    }
    coll_settings.ccl.push_back(std::move(p));
  }
  collectives_ = std::make_unique<coll::Collectives>(
      transfers_, static_cast<coll::CollServices&>(*this), std::move(coll_settings));
  progress_.configure(Progress::Settings{regions_.get(), staging_.get(), incoming_.get(),
                                         timeout_ms_, heartbeat_ms_, collectives_.get()});

  st = progress_.start(use_progress_thread_);
  if (st != HMC_SUCCESS) return st;
  if ((st = start_metrics()) != HMC_SUCCESS) return st;
  HMC_LOG_I("context {:016x} ready: control plane unix:@{} tcp:{}:{}, progress thread {}", id_,
            address_.unix_name, address_.tcp_host, address_.tcp_port,
            use_progress_thread_ ? "on" : "off");
  return HMC_SUCCESS;
}

hmc_status_t Context::start_control_plane(const std::string& host, uint16_t port) {
  address_.host_id = caps_.host_id;
  address_.hostname = caps_.hostname;
  address_.pid = getpid();
  address_.context_id = id_;
  address_.unix_name = fmt::format("hmc-{}-{:016x}", getpid(), id_);
  hmc_status_t st = control::listen_unix(address_.unix_name, &unix_listener_);
  if (st != HMC_SUCCESS) return st;
  uint16_t bound = 0;
  st = control::listen_tcp(host, port, &tcp_listener_, &bound);
  if (st != HMC_SUCCESS) return st;
  address_.tcp_host = (host == "0.0.0.0" || host == "::") ? first_external_ipv4() : host;
  address_.tcp_port = bound;
  return HMC_SUCCESS;
}

const std::vector<path::CopyRecord>& Context::copy_records(bool measure_now) {
  static const std::vector<path::CopyRecord> kNone;
  std::lock_guard<std::mutex> lock(copy_mutex_);
  if (copy_done_) return copy_records_;  // never changes once done
  if (!measure_now) return kNone;
  bool measure = config_.get_bool("HMC_DEVICE_COPY_CALIBRATE");
  for (const Device& d : devices_.devices()) {
    if (d.is_host() || copy_by_plugin_.count(d.plugin_name)) continue;
    CopyFigures f;
    if (measure || d.copy_bandwidth_MBps)
      f = copy_figures(devices_, d, timeout_ms_);
    else
      f.basis = "not measured (HMC_DEVICE_COPY_CALIBRATE=0)";
    copy_by_plugin_[d.plugin_name] = {d.name, f};
    copy_records_.push_back({d.plugin_name, f.d2h_MBps, f.h2d_MBps, f.d2d_MBps});
  }
  copy_done_ = true;
  return copy_records_;
}

CopyFigures Context::copy_figures_of(const Device& d) {
  std::lock_guard<std::mutex> lock(copy_mutex_);
  auto it = copy_by_plugin_.find(d.plugin_name);
  if (it == copy_by_plugin_.end()) return {};
  CopyFigures f = it->second.second;
  if (f.basis == "measured" && it->second.first != d.name) f.basis += " on " + it->second.first;
  return f;
}

void Context::build_capabilities() {
  caps_.host_id = control::host_identity();
  caps_.hostname = control::local_hostname();
  caps_.pid = getpid();
  caps_.context_id = id_;
  caps_.stage_chunk = stage_chunk_;
  caps_.stage_first = std::min<uint64_t>(kFirstPiece, stage_chunk_);
  if (config_.get_bool("HMC_STAGE_SHARED"))
    caps_.features |= path::kFeatureSharedBounces | path::kFeatureIpcOrShared;
  caps_.features |= path::kFeatureCarriedNotify;
  caps_.device_count = static_cast<uint32_t>(devices_.devices().size() - 1);  // all but host
  // Device IPC (framed/ipc.cpp): the device plugins with an IPC-capable device.
  if (config_.get_bool("HMC_DEVICE_IPC"))
    for (const Device& d : devices_.devices())
      if (!d.is_host() && (d.caps & HMC_DEVICE_CAP_IPC) &&
          std::find(caps_.ipc_plugins.begin(), caps_.ipc_plugins.end(), d.plugin_name) ==
              caps_.ipc_plugins.end())
        caps_.ipc_plugins.push_back(d.plugin_name);
  // An explicit HMC_NET_PLUGINS order is a preference that path choice honours.
  std::vector<std::string> order;
  for (const auto& n : config_.get_list("HMC_NET_PLUGINS"))
    if (!n.empty() && n[0] != '^') order.push_back(n);
  for (const auto& net : nets_) {
    uint32_t pref = 0;
    for (size_t i = 0; i < order.size(); ++i)
      if (order[i] == net->name()) pref = static_cast<uint32_t>(i + 1);
    for (const auto& d : net->devices()) {
      path::NetRecord r;
      r.plugin = net->name();
      r.device = d.name;
      r.bandwidth_MBps = d.props.bandwidth_MBps;
      r.latency_ns = d.props.latency_ns;
      r.mem_ifaces = d.props.mem_ifaces;
      r.nic_guid = d.props.nic_guid;
      r.nic_port = d.props.nic_port;
      if (d.props.fabric) r.fabric = d.props.fabric;
      r.rma_mem_ifaces = rma_mem_ifaces(d);
      r.flags = d.props.flags;
      r.preference = pref;
      caps_.net.push_back(r);
    }
  }
}

std::vector<NetDevice*> Context::net_devices() const {
  std::vector<NetDevice*> out;
  for (const auto& net : nets_)
    for (auto& d : net->devices()) out.push_back(&d);
  return out;
}

std::vector<uint8_t> Context::address() const {
  return encode_address(address_);
}

Context::~Context() {
  metrics_server_.stop();
  write_metrics_file();
  progress_.stop();
  incoming_.reset();  // connectors in setup close their plugin listeners while the plugins live
  if (collectives_) collectives_->shutdown();  // while the peers its collectives use are here

  std::vector<std::shared_ptr<Peer>> peers;
  {
    std::lock_guard<std::mutex> lock(peers_mutex_);
    peers.swap(peers_);
  }
  for (auto& p : peers) {
    {
      std::lock_guard<std::mutex> lock(p->ctrl_mutex);
      if (p->ctrl && !p->lost) {
        control::Writer w;
        msg::encode_bye("context destroyed", &w);
        p->ctrl->send(control::MsgType::Bye, w);
      }
    }
    fail_peer(*p, HMC_ERR_CANCELLED, "the context was destroyed");
    Handles::remove(p.get());
  }
  for (auto& p : closed_peers_) Handles::remove(p.get());
  if (regions_) regions_->release_all();  // the Remotes' keys went with their peers, above
  failure_.reap_parked_transfers(now_ns() + uint64_t(timeout_ms_) * 1000000);
  RequestTable::release_all(this);
  peers.clear();
  closed_peers_.clear();
  devices_.release_all();
  nets_.clear();
  loader_.finalize_all();
}

void Context::wire_control_handlers() {
  add_liveness_handlers(dispatch_);
  transfers_.add_handlers(dispatch_);
  regions_->add_handlers(dispatch_);
  staging_->add_handlers(dispatch_);
}

void Context::register_peer(const std::shared_ptr<Peer>& peer) {
  peer->last_heard_ns = now_ns();
  {
    std::lock_guard<std::mutex> lock(peers_mutex_);
    peers_.push_back(peer);
  }
  Handles::add(peer.get(), HandleKind::Peer);
  progress_.wake();
}

hmc_status_t Context::connect(const Address& addr, int timeout_ms, std::shared_ptr<Peer>* out) {
  std::shared_ptr<Peer> peer;
  hmc_status_t st = connector_->connect(addr, timeout_ms, &peer);
  if (st != HMC_SUCCESS) return st;
  register_peer(peer);
  *out = peer;
  return HMC_SUCCESS;
}

hmc_status_t Context::accept(int timeout_ms, std::shared_ptr<Peer>* out) {
  // Without a progress thread nobody else advances the connectors: this thread does, while it
  // waits.
  return incoming_->next(deadline_after_ms(timeout_ms), !use_progress_thread_, out);
}

void Context::peer_arrived(std::shared_ptr<Peer> peer,
                           std::vector<control::Channel::Message> extra) {
  // What it sent right after its setup goes first, under its control lock as in a progress
  // pass: once registered, the progress thread reads what came later.
  if (!extra.empty()) {
    std::lock_guard<std::mutex> lock(peer->ctrl_mutex);
    for (auto& msg : extra) dispatch_.dispatch(peer, msg);
  }
  register_peer(peer);
  // A connection made for collectives is filed for them; every other one goes to hmc_accept.
  if (peer->remote.features & path::kFeatureGroupLink) {
    std::lock_guard<std::mutex> lock(group_mutex_);
    group_peers_[peer->remote.context_id] = std::move(peer);
    return;
  }
  incoming_->queue_for_accept(std::move(peer));
}

hmc_status_t Context::group_peer(const coll::Member& m, bool initiate, uint64_t deadline_ns,
                                 std::shared_ptr<Peer>* out) {
  auto filed = [&] {
    std::lock_guard<std::mutex> lock(group_mutex_);
    auto it = group_peers_.find(m.context_id);
    if (it == group_peers_.end() || it->second->lost) return false;
    *out = it->second;
    return true;
  };
  if (filed()) return HMC_SUCCESS;
  auto left_ms = [&] {
    uint64_t now = now_ns();
    return now >= deadline_ns ? 0 : int((deadline_ns - now) / 1000000);
  };
  if (initiate) {
    Address addr;
    hmc_status_t st = decode_address(m.address.data(), m.address.size(), &addr);
    if (st != HMC_SUCCESS) return st;
    std::shared_ptr<Peer> peer;
    if ((st = connector_->connect(addr, left_ms(), &peer, true)) != HMC_SUCCESS) return st;
    register_peer(peer);
    std::lock_guard<std::mutex> lock(group_mutex_);
    group_peers_[m.context_id] = peer;
    *out = peer;
    return HMC_SUCCESS;
  }
  // The peer connects to us: its connection is set up with every other connector's
  // (peer/incoming.h) and filed by peer_arrived. Without a progress thread this thread drives
  // them meanwhile.
  for (;;) {
    if (filed()) return HMC_SUCCESS;
    if (now_ns() >= deadline_ns) {
      IncomingPeers::Stats st = incoming_->stats();
      return fail(
          HMC_ERR_TIMEOUT, "it did not connect in time{}",
          st.last_failure.empty() ? "" : " (last failed connector: " + st.last_failure + ")");
    }
    bool moved = !use_progress_thread_ && incoming_->drive();
    if (!moved) usleep(500);
  }
}

void Context::abandon_peer(Peer& peer, const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(peer.ctrl_mutex);
    peer.ctrl.reset();  // its end sees the connection close now
  }
  fail_peer(peer, HMC_ERR_PEER_LOST, reason);
}

hmc_status_t Context::close_peer(const std::shared_ptr<Peer>& peer) {
  {
    std::lock_guard<std::mutex> lock(peers_mutex_);
    for (size_t i = 0; i < peers_.size(); ++i) {
      if (peers_[i] == peer) {
        peers_.erase(peers_.begin() + i);
        break;
      }
    }
    closed_peers_.push_back(peer);
  }
  Handles::remove(peer.get());
  peer->closed = true;
  {
    std::lock_guard<std::mutex> lock(peer->ctrl_mutex);
    if (peer->ctrl && !peer->lost) {
      control::Writer w;
      msg::encode_bye("hmc_peer_close", &w);
      peer->ctrl->send(control::MsgType::Bye, w);
    }
    peer->ctrl.reset();
  }
  fail_peer(*peer, HMC_ERR_CANCELLED, "the peer was closed with hmc_peer_close");
  return HMC_SUCCESS;
}

}  // namespace hmc
