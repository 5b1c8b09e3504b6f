// Connecting two contexts: control connection, hello (version, token challenge), capability
// exchange, path choice by the acceptor, then the data endpoint on the chosen net plugin.
//
//   initiator                          acceptor
//   connect (unix same host, else tcp) accept
//   Hello ... Welcome (control/handshake)
//   Caps                        ->
//                               <-     Caps
//                               <-     NetHandle {chosen plugin/device, plugin handle | error}
//   plugin connect, ep_ready           plugin accept
//   NetReady {status}           ->
#include "peer/establish.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>

#include "control/handshake.h"
#include "control/socket.h"
#include "device/registry.h"
#include "path/calibrate.h"
#include "peer/capabilities.h"
#include "peer/messages.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/status.h"

namespace hmc {

namespace {

int remaining_ms(uint64_t deadline) {
  uint64_t now = now_ns();
  return now >= deadline
             ? 0
             : static_cast<int>(std::min<uint64_t>((deadline - now) / 1000000 + 1, INT32_MAX));
}

uint64_t deadline_after(int timeout_ms) {
  return now_ns() + uint64_t(timeout_ms) * 1000000;
}

// Waits a little for the plugin to have something to do.
void idle_wait(NetPlugin& net) {
  int fd = net.wait_fd();
  if (fd >= 0) {
    struct pollfd p = {fd, POLLIN, 0};
    poll(&p, 1, 1);
  } else {
    usleep(100);
  }
}

// Receives the next message, expecting `type`; an Error message becomes its status.
hmc_status_t expect(control::Channel& ch, control::MsgType type, uint64_t deadline,
                    control::Channel::Message* out, const char* what) {
  hmc_status_t st = ch.receive_one(out, deadline);
  if (st != HMC_SUCCESS) return fail(st, "{}: {}", what, last_error());
  if (out->type == control::MsgType::Error) {
    control::ErrorMsg e;
    if (!control::decode_error(out->payload.data(), out->payload.size(), &e))
      return fail(HMC_ERR_PROTOCOL, "{}: malformed error message from {}", what, ch.peer_name());
    return fail(control::status_from_remote(e.status), "{}: {} says: {}", what, ch.peer_name(),
                e.text);
  }
  if (out->type != type)
    return fail(HMC_ERR_PROTOCOL, "{}: expected message {} from {}, got {}", what,
                control::msg_type_name(type), ch.peer_name(),
                control::msg_type_name(static_cast<uint16_t>(out->type)));
  return HMC_SUCCESS;
}

std::string peer_name(const control::HelloInfo& h) {
  return fmt::format("pid {} on {}", h.pid, h.hostname);
}

}  // namespace

// The piece size both sides frame messages with (docs/protocols-wire.md), or 0 when neither side
// has device memory (and every message is a single plugin message, as between host-only peers).
uint64_t framing_chunk(const path::Capabilities& mine, const path::Capabilities& theirs) {
  if (mine.device_count == 0 && theirs.device_count == 0) return 0;
  return std::min(mine.stage_chunk, theirs.stage_chunk);
}

// The message size the per-peer log line shows device-memory ways at.
constexpr uint64_t kModeLogSize = 64u << 20;

path::Capabilities PeerConnector::capabilities(path::CalibrationMode mode,
                                               std::vector<path::CalibrationOutcome>* outcomes) {
  path::Capabilities caps = s_.caps;
  // Device copy figures, for the peer's choice of how our device memory crosses (measured
  // once per context, at the first connect or accept).
  if (caps.device_count > 0)
    caps.copy = services_.copy_records(mode == path::CalibrationMode::Measure);
  if (mode == path::CalibrationMode::Measure && !outcomes &&
      (!s_.forced_path.empty() || !path::calibration_useful(caps)))
    return caps;  // the common case of a single device or a forced path: nothing to look up
  path::CalibrationSettings settings = path::calibration_settings(*s_.config);
  std::vector<path::CalibrationTarget> targets;
  for (auto& net : *s_.nets) {
    const plugin::Record* rec = s_.loader->find(plugin::Kind::Net, net->name());
    std::string config_text = path::device_config_text(*s_.config, net->name());
    for (auto& d : net->devices()) targets.push_back({&d, rec ? rec->path : "", config_text});
  }
  path::calibrate_capabilities(settings, targets, &caps, mode, outcomes);
  return caps;
}

// Finds the local net device the path names.
NetDevice* PeerConnector::find_device(const std::string& plugin, const std::string& dev) {
  for (auto& net : *s_.nets)
    if (net->name() == plugin)
      for (auto& d : net->devices())
        if (d.name == dev) return &d;
  return nullptr;
}

std::shared_ptr<Peer> PeerConnector::make_peer(std::unique_ptr<control::Channel> ch,
                                               const control::HelloInfo& hello,
                                               const path::Capabilities& remote,
                                               const path::Choice& choice, NetDevice* dev,
                                               hmc_net_ep_t* ep, const std::string& address) {
  auto peer = std::make_shared<Peer>();
  peer->ctx = s_.owner;
  peer->name = fmt::format("{} ({})", peer_name(hello), address);
  peer->address = address;
  peer->remote = remote;
  peer->choice = choice;
  peer->same_host = !remote.host_id.empty() && remote.host_id == s_.caps.host_id;
  peer->net = dev->plugin;
  peer->net_device = dev;
  peer->ep = ep;
  peer->notify_sender.carry_offered = HMC_NET_SLOT(dev->plugin->table(), iput_notify) &&
                                      (remote.features & path::kFeatureCarriedNotify) &&
                                      s_.config->get_bool("HMC_NET_NOTIFY_CARRIED");
  peer->ctrl = std::move(ch);
  peer->last_sent_ns = now_ns();
  peer->framing.chunk = framing_chunk(s_.caps, remote);
  peer->framing.first_piece =
      std::min({peer->framing.chunk, remote.stage_first, s_.caps.stage_first});
  // Device IPC: another process on this host, both sides offering the vendor.
  if (peer->framing.on() && peer->same_host && remote.pid != s_.caps.pid)
    for (const auto& p : s_.caps.ipc_plugins)
      if (std::find(remote.ipc_plugins.begin(), remote.ipc_plugins.end(), p) !=
          remote.ipc_plugins.end())
        peer->framing.ipc_plugins.push_back(p);
  peer->framing.shared_ok = peer->framing.on() && peer->same_host && remote.pid != s_.caps.pid &&
                            (remote.features & s_.caps.features & path::kFeatureSharedBounces);
  peer->framing.ipc_or_shared =
      peer->framing.shared_ok && (remote.features & s_.caps.features & path::kFeatureIpcOrShared);
  std::string modes;
  if (peer->framing.on()) {
    for (const auto& local : services_.copy_records(true)) {
      auto costs = path::device_mode_costs({local, remote.copy, peer->framing.ipc_for(local.plugin),
                                            peer->framing.shared_ok, choice.bandwidth_MBps,
                                            choice.latency_us, peer->framing.chunk});
      modes +=
          fmt::format("; {} memory: {}", local.plugin, path::describe_modes(costs, kModeLogSize));
      peer->framing.device_modes.emplace_back(local.plugin, std::move(costs));
    }
  }
  HMC_LOG_I("peer {}: path {} ({}){}{}{}", peer->name, choice.key(), choice.reason,
            peer->framing.on()
                ? fmt::format(", messages framed in {}-byte pieces", peer->framing.chunk)
                : "",
            peer->notify_sender.carry_offered ? ", put notifications travel with the data" : "",
            modes.empty() ? ""
                          : fmt::format("; expected for {} MiB of device memory the net "
                                        "path cannot reach, best first{}",
                                        kModeLogSize >> 20, modes));
  return peer;
}

hmc_status_t PeerConnector::connect(const Address& addr, int timeout_ms, std::shared_ptr<Peer>* out,
                                    bool group_link) {
  uint64_t deadline = deadline_after(timeout_ms);
  control::Fd fd;
  bool local = !addr.unix_name.empty() && (addr.tcp_port == 0 || addr.host_id == s_.caps.host_id);
  std::string where = local ? "unix @" + addr.unix_name
                            : "tcp " + control::format_host_port(addr.tcp_host, addr.tcp_port);
  hmc_status_t st =
      local ? control::connect_unix(addr.unix_name, remaining_ms(deadline), &fd)
            : control::connect_tcp(addr.tcp_host, addr.tcp_port, remaining_ms(deadline), &fd);
  if (st != HMC_SUCCESS) return st;
  auto ch = std::make_unique<control::Channel>(std::move(fd));
  ch->set_peer_name(where);

  control::HelloInfo mine{control::kProtocolVersion, s_.caps.host_id, s_.caps.hostname, s_.caps.pid,
                          s_.context_id};
  control::HelloInfo theirs;
  st = control::handshake_initiator(*ch, mine, s_.auth_token, deadline, &theirs);
  if (st != HMC_SUCCESS) return st;
  ch->set_peer_name(fmt::format("{} ({})", peer_name(theirs), where));

  path::Capabilities mine_caps = capabilities(path::CalibrationMode::Measure, nullptr);
  if (group_link) mine_caps.features |= path::kFeatureGroupLink;
  control::Writer w;
  msg::encode_caps(mine_caps, &w);
  if ((st = ch->send_wait(control::MsgType::Caps, w, deadline)) != HMC_SUCCESS) return st;
  control::Channel::Message m;
  if ((st = expect(*ch, control::MsgType::Caps, deadline, &m,
                   "hmc_connect (waiting for the peer's Caps)")) != HMC_SUCCESS)
    return st;
  path::Capabilities remote;
  msg::CapsDecode why;
  if (!msg::decode_caps(m.payload.data(), m.payload.size(), &remote, &why))
    return fail(why == msg::CapsDecode::Malformed ? HMC_ERR_PROTOCOL : HMC_ERR_VERSION,
                "hmc_connect: {} sent {}", ch->peer_name(), msg::caps_decode_text(why));

  if ((st = expect(*ch, control::MsgType::NetHandle, deadline, &m,
                   "hmc_connect (waiting for the peer's path choice, NetHandle)")) != HMC_SUCCESS)
    return st;
  msg::NetHandle nh;
  if (!msg::decode_net_handle(m.payload.data(), m.payload.size(), &nh))
    return fail(HMC_ERR_PROTOCOL, "hmc_connect: malformed path message from {}", ch->peer_name());
  if (nh.status != HMC_SUCCESS)
    return fail(control::status_from_remote(nh.status), "hmc_connect to {}: {}", ch->peer_name(),
                nh.text);

  auto report = [&](hmc_status_t status, const std::string& text) {
    control::Writer rw;
    msg::encode_net_ready({status, text}, &rw);
    ch->send_wait(control::MsgType::NetReady, rw, deadline);
  };
  // This side's device of the pair: named by the acceptor where the two pair by fabric.
  const std::string& my_device = nh.peer_device.empty() ? nh.device : nh.peer_device;
  NetDevice* dev = find_device(nh.plugin, my_device);
  if (!dev) {
    std::string text = fmt::format("the peer chose path {}/{}, which this side does not have",
                                   nh.plugin, my_device);
    report(HMC_ERR_NO_PATH, text);
    return fail(HMC_ERR_NO_PATH, "hmc_connect to {}: {}", ch->peer_name(), text);
  }
  NetPlugin& net = *dev->plugin;
  hmc_net_ep_t* ep = nullptr;
  hmc_plugin_status_t ps;
  {
    std::lock_guard<std::mutex> lock(net.mutex());
    ps = net.table()->connect(net.ctx(), dev->index, nh.handle.data(), nh.handle.size(), &ep);
  }
  if (ps != HMC_PLUGIN_SUCCESS || !ep) {
    std::string text = fmt::format("{} connect failed: {}", dev->key(), plugin_status_string(ps));
    report(HMC_ERR_PLUGIN, text);
    return fail(from_plugin_status(ps), "hmc_connect to {}: {}", ch->peer_name(), text);
  }
  // The plugin's hello travels here, before any traffic on the data path, where the acceptor's
  // plugin takes one (net.h, connect_hello); otherwise the plugin sends its own.
  if ((nh.flags & msg::kNetHandleTakesHello) && HMC_NET_SLOT(net.table(), connect_hello)) {
    msg::NetHello hello;
    hello.hello.resize(HMC_NET_HELLO_MAX);
    size_t len = hello.hello.size();
    {
      std::lock_guard<std::mutex> lock(net.mutex());
      ps = net.table()->connect_hello(ep, hello.hello.data(), &len);
      if (ps != HMC_PLUGIN_SUCCESS || len > HMC_NET_HELLO_MAX) net.table()->close_ep(ep);
    }
    if (ps != HMC_PLUGIN_SUCCESS || len > HMC_NET_HELLO_MAX) {
      std::string text = fmt::format(
          "{} connect_hello failed: {}", dev->key(),
          ps != HMC_PLUGIN_SUCCESS ? plugin_status_string(ps) : "the hello is too large");
      report(HMC_ERR_PLUGIN, text);
      return fail(HMC_ERR_PLUGIN, "hmc_connect to {}: {}", ch->peer_name(), text);
    }
    if (len > 0) {
      hello.hello.resize(len);
      control::Writer hw;
      msg::encode_net_hello(hello, &hw);
      if ((st = ch->send_wait(control::MsgType::NetHello, hw, deadline)) != HMC_SUCCESS) {
        std::lock_guard<std::mutex> lock(net.mutex());
        net.table()->close_ep(ep);
        return st;
      }
    }
  }
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(net.mutex());
      if (HMC_NET_SLOT(net.table(), progress)) net.table()->progress(net.ctx());
      ps = net.table()->ep_ready(ep);
      if (ps != HMC_PLUGIN_SUCCESS && ps != HMC_PLUGIN_IN_PROGRESS) net.table()->close_ep(ep);
    }
    if (ps == HMC_PLUGIN_SUCCESS) break;
    std::string text;
    if (ps != HMC_PLUGIN_IN_PROGRESS)
      text = fmt::format("{} endpoint failed: {}", dev->key(), plugin_status_string(ps));
    else if (now_ns() >= deadline)
      text = fmt::format("{} endpoint not established within {} ms", dev->key(), timeout_ms);
    if (!text.empty()) {
      if (ps == HMC_PLUGIN_IN_PROGRESS) {
        std::lock_guard<std::mutex> lock(net.mutex());
        net.table()->close_ep(ep);
      }
      report(HMC_ERR_PEER_LOST, text);
      return fail(ps == HMC_PLUGIN_IN_PROGRESS ? HMC_ERR_TIMEOUT : from_plugin_status(ps),
                  "hmc_connect to {}: {}", ch->peer_name(), text);
    }
    idle_wait(net);
  }
  control::Writer rw;
  msg::encode_net_ready({HMC_SUCCESS, ""}, &rw);
  if ((st = ch->send_wait(control::MsgType::NetReady, rw, deadline)) != HMC_SUCCESS) {
    std::lock_guard<std::mutex> lock(net.mutex());
    net.table()->close_ep(ep);
    return st;
  }
  path::Choice choice;
  choice.plugin = nh.plugin;
  choice.device = my_device;
  choice.peer_device = nh.device;
  choice.reason = nh.text;
  for (const auto& c : path::rank(mine_caps, remote))
    if (c.key() == choice.key() && c.peer_device == choice.peer_device) {
      choice.bandwidth_MBps = c.bandwidth_MBps;
      choice.latency_us = c.latency_us;
      choice.basis = c.basis;
      choice.score = c.score;
    }
  *out = make_peer(std::move(ch), theirs, remote, choice, dev, ep, where);
  return HMC_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// The accepting side, one arrival at a time, never waiting: peer/incoming.h runs many.

PeerConnector::Arrival::~Arrival() {
  if (!dev_ || (!listener_ && !ep_)) return;
  NetPlugin& net = *dev_->plugin;
  std::lock_guard<std::mutex> lock(net.mutex());
  if (listener_) net.table()->close_listener(listener_);
  if (ep_) net.table()->close_ep(ep_);
}

std::unique_ptr<PeerConnector::Arrival> PeerConnector::arrive(control::Fd fd, std::string remote,
                                                              int handshake_timeout_ms) {
  auto ch = std::make_unique<control::Channel>(std::move(fd));
  ch->set_peer_name(remote);
  ch->set_max_payload(control::kMaxHandshakePayload);  // until the hello is done
  control::HelloInfo mine{control::kProtocolVersion, s_.caps.host_id, s_.caps.hostname, s_.caps.pid,
                          s_.context_id};
  const uint64_t now = now_ns();
  return std::unique_ptr<Arrival>(new Arrival(
      std::move(ch), std::move(remote), control::AcceptorHandshake(std::move(mine), s_.auth_token),
      now, now + uint64_t(handshake_timeout_ms) * 1000000));
}

// Every failure of an arrival passes here: the message names the connector and its stage.
hmc_status_t PeerConnector::arrival_failed(Arrival& a, hmc_status_t st) {
  static const char* const kStage[] = {"in its hello", "exchanging capabilities",
                                       "setting up the data path"};
  std::string who = a.stage_ == Arrival::Stage::Hello ? a.remote_ : a.ch_->peer_name();
  return fail(st, "incoming connector {} failed {}: {}", who, kStage[static_cast<int>(a.stage_)],
              last_error());
}

// The connector's capabilities arrived: answer with ours, choose the path and open the plugin's
// listener for it.
hmc_status_t PeerConnector::on_caps(Arrival& a, const control::Channel::Message& m) {
  control::Channel& ch = *a.ch_;
  msg::CapsDecode why;
  if (!msg::decode_caps(m.payload.data(), m.payload.size(), &a.remote_caps_, &why))
    return fail(why == msg::CapsDecode::Malformed ? HMC_ERR_PROTOCOL : HMC_ERR_VERSION, "{}",
                msg::caps_decode_text(why));
  path::Capabilities mine_caps = capabilities(path::CalibrationMode::Measure, nullptr);
  control::Writer w;
  msg::encode_caps(mine_caps, &w);
  hmc_status_t st = ch.send(control::MsgType::Caps, w);
  if (st != HMC_SUCCESS) return st;

  // Path choice is ours to make; the initiator follows it.
  msg::NetHandle nh;
  path::Choice& choice = a.choice_;
  st = path::choose(mine_caps, a.remote_caps_, s_.forced_path, &choice);
  NetDevice* dev = st == HMC_SUCCESS ? find_device(choice.plugin, choice.device) : nullptr;
  if (st == HMC_SUCCESS && !dev)
    st = fail(HMC_ERR_INTERNAL, "the chosen path {} vanished", choice.key());
  if (st == HMC_SUCCESS) {
    a.dev_ = dev;
    nh.handle.resize(HMC_NET_HANDLE_MAX);
    size_t len = nh.handle.size();
    hmc_plugin_status_t ps;
    {
      std::lock_guard<std::mutex> lock(dev->plugin->mutex());
      ps = dev->plugin->table()->listen(dev->plugin->ctx(), dev->index, nh.handle.data(), &len,
                                        &a.listener_);
    }
    if (ps != HMC_PLUGIN_SUCCESS || len > HMC_NET_HANDLE_MAX)
      st = fail(from_plugin_status(ps), "{} listen failed: {}", choice.key(),
                plugin_status_string(ps));
    nh.handle.resize(std::min<size_t>(len, HMC_NET_HANDLE_MAX));
  }
  nh.status = st;
  nh.text = st == HMC_SUCCESS ? choice.reason : last_error();
  nh.plugin = choice.plugin;
  nh.device = choice.device;
  if (choice.peer_device != choice.device) nh.peer_device = choice.peer_device;
  if (dev && HMC_NET_SLOT(dev->plugin->table(), accept_hello))
    nh.flags |= msg::kNetHandleTakesHello;
  std::string saved_error = last_error();
  control::Writer hw;
  msg::encode_net_handle(nh, &hw);
  hmc_status_t sent = ch.send(control::MsgType::NetHandle, hw);
  if (st != HMC_SUCCESS) return set_error(st, saved_error);
  if (sent != HMC_SUCCESS) return sent;
  a.stage_ = Arrival::Stage::DataPath;
  return HMC_SUCCESS;
}

hmc_status_t PeerConnector::on_data_path_message(Arrival& a, control::Channel::Message& m) {
  if (a.net_ready_) {
    a.extra_.push_back(std::move(m));  // sent after NetReady: handled once registered
    return HMC_SUCCESS;
  }
  NetPlugin& net = *a.dev_->plugin;
  if (m.type == control::MsgType::NetHello) {
    msg::NetHello hello;
    hmc_plugin_status_t ps = HMC_PLUGIN_ERR_INVALID_ARGUMENT;
    if (msg::decode_net_hello(m.payload.data(), m.payload.size(), &hello) && a.listener_) {
      std::lock_guard<std::mutex> lock(net.mutex());
      ps = net.table()->accept_hello(a.listener_, hello.hello.data(), hello.hello.size());
    }
    if (ps != HMC_PLUGIN_SUCCESS)
      return fail(from_plugin_status(ps), "{} refused the connector's hello: {}", a.choice_.key(),
                  plugin_status_string(ps));
    return HMC_SUCCESS;
  }
  if (m.type == control::MsgType::NetReady) {
    msg::NetReady nr;
    if (!msg::decode_net_ready(m.payload.data(), m.payload.size(), &nr))
      return fail(HMC_ERR_PROTOCOL, "malformed NetReady");
    if (nr.status != HMC_SUCCESS)
      return fail(control::status_from_remote(nr.status), "the peer could not connect {}: {}",
                  a.choice_.key(), nr.text);
    a.net_ready_ = true;
    return HMC_SUCCESS;
  }
  return fail(HMC_ERR_PROTOCOL, "unexpected message {} during setup",
              control::msg_type_name(static_cast<uint16_t>(m.type)));
}

hmc_status_t PeerConnector::on_message(Arrival& a, control::Channel::Message& m) {
  control::Channel& ch = *a.ch_;
  switch (a.stage_) {
    case Arrival::Stage::Hello: {
      hmc_status_t st = a.hs_.on_message(ch, m);
      if (st != HMC_SUCCESS) return st;
      if (a.hs_.stage() != control::AcceptorHandshake::Stage::Done) return HMC_SUCCESS;
      // A proven hmc peer (with the token, when one is set): the rest of its setup gets the
      // full timeout, since the connector measures its links before it sends its capabilities.
      a.theirs_ = a.hs_.theirs();
      ch.set_peer_name(fmt::format("{} ({})", peer_name(a.theirs_), a.remote_));
      ch.set_max_payload(control::kMaxFramePayload);
      a.stage_ = Arrival::Stage::Caps;
      a.deadline_ns_ = deadline_after(s_.timeout_ms);
      return HMC_SUCCESS;
    }
    case Arrival::Stage::Caps:
      if (m.type == control::MsgType::Error) {
        control::ErrorMsg e;
        if (!control::decode_error(m.payload.data(), m.payload.size(), &e))
          return fail(HMC_ERR_PROTOCOL, "malformed Error message");
        return fail(control::status_from_remote(e.status), "the peer says: {}", e.text);
      }
      if (m.type != control::MsgType::Caps)
        return fail(HMC_ERR_PROTOCOL, "expected Caps, received {}",
                    control::msg_type_name(static_cast<uint16_t>(m.type)));
      return on_caps(a, m);
    case Arrival::Stage::DataPath: return on_data_path_message(a, m);
  }
  return fail(HMC_ERR_INTERNAL, "arrival in an unknown stage");
}

hmc_status_t PeerConnector::advance(Arrival& a, std::shared_ptr<Peer>* out,
                                    std::vector<control::Channel::Message>* extra) {
  control::Channel& ch = *a.ch_;
  if (a.stage_ == Arrival::Stage::DataPath && !a.ep_) {
    // The plugin is progressed until both halves are done: some (UCX over tcp) need the
    // accepting side to keep going after accept returned for the connector to finish.
    NetPlugin& net = *a.dev_->plugin;
    std::lock_guard<std::mutex> lock(net.mutex());
    if (HMC_NET_SLOT(net.table(), progress)) net.table()->progress(net.ctx());
    hmc_plugin_status_t ps = net.table()->accept(a.listener_, &a.ep_);
    if (ps != HMC_PLUGIN_SUCCESS && ps != HMC_PLUGIN_IN_PROGRESS) {
      a.ep_ = nullptr;
      return arrival_failed(a, fail(from_plugin_status(ps), "{} accept failed: {}", a.choice_.key(),
                                    plugin_status_string(ps)));
    }
  } else if (a.stage_ == Arrival::Stage::DataPath) {
    NetPlugin& net = *a.dev_->plugin;
    std::lock_guard<std::mutex> lock(net.mutex());
    if (HMC_NET_SLOT(net.table(), progress)) net.table()->progress(net.ctx());
  }
  if (ch.want_write()) {
    hmc_status_t st = ch.flush();
    if (st != HMC_SUCCESS) return arrival_failed(a, st);
  }
  std::vector<control::Channel::Message> msgs;
  hmc_status_t rs = ch.receive(&msgs);
  for (auto& m : msgs) {
    hmc_status_t st = on_message(a, m);
    if (st != HMC_SUCCESS) {
      std::string e = last_error();
      (void)ch.flush();  // an Error queued for the peer leaves now or never
      return arrival_failed(a, set_error(st, e));
    }
  }
  if (rs != HMC_SUCCESS) return arrival_failed(a, rs);
  if (a.stage_ == Arrival::Stage::DataPath && a.ep_ && a.net_ready_) {
    {
      NetPlugin& net = *a.dev_->plugin;
      std::lock_guard<std::mutex> lock(net.mutex());
      net.table()->close_listener(a.listener_);
      a.listener_ = nullptr;
    }
    hmc_net_ep_t* ep = std::exchange(a.ep_, nullptr);
    *out = make_peer(std::move(a.ch_), a.theirs_, a.remote_caps_, a.choice_, a.dev_, ep, a.remote_);
    *extra = std::move(a.extra_);
    return HMC_SUCCESS;
  }
  if (now_ns() < a.deadline_ns_) return HMC_IN_PROGRESS;
  const uint64_t waited_ms = (now_ns() - a.started_ns_) / 1000000;
  switch (a.stage_) {
    case Arrival::Stage::Hello:
      return arrival_failed(
          a, fail(HMC_ERR_TIMEOUT,
                  "no {} within {} ms of connecting (HMC_HANDSHAKE_TIMEOUT_MS): silent, slow or "
                  "not an hmc peer",
                  a.hs_.waiting_for(), waited_ms));
    case Arrival::Stage::Caps:
      return arrival_failed(
          a, fail(HMC_ERR_TIMEOUT, "no capabilities within {} ms of its hello (HMC_TIMEOUT_MS)",
                  s_.timeout_ms));
    case Arrival::Stage::DataPath:
      return arrival_failed(
          a, fail(HMC_ERR_TIMEOUT, "the {} data connection was {} within {} ms (HMC_TIMEOUT_MS)",
                  a.choice_.key(), a.ep_ ? "up but no NetReady came" : "not established",
                  s_.timeout_ms));
  }
  return HMC_IN_PROGRESS;
}

std::string PeerConnector::same_host_ways(const Device& d) {
  const path::CopyRecord* local = nullptr;
  for (const auto& c : services_.copy_records(false))
    if (c.plugin == d.plugin_name) local = &c;
  if (!local) return "";
  path::Capabilities mine = capabilities(path::CalibrationMode::LookupOnly, nullptr);
  path::Capabilities twin = mine;  // another process like this one
  twin.pid = mine.pid + 1;
  path::Choice choice;
  std::string saved = last_error();
  bool net = path::choose(mine, twin, s_.forced_path, &choice) == HMC_SUCCESS;
  set_error(HMC_SUCCESS, saved);  // a choice that fails here is not this call's error
  bool ipc = std::find(mine.ipc_plugins.begin(), mine.ipc_plugins.end(), d.plugin_name) !=
             mine.ipc_plugins.end();
  bool shared = (mine.features & path::kFeatureSharedBounces) != 0;
  auto costs =
      path::device_mode_costs({*local, mine.copy, ipc, shared, net ? choice.bandwidth_MBps : 0.0,
                               net ? choice.latency_us : 0.0, mine.stage_chunk});
  std::string ways = path::describe_modes(costs, kModeLogSize);
  if (net) ways += " (transport over " + choice.key() + ")";
  return ways;
}

path::Capabilities local_capabilities(PeerConnector& connector, path::CalibrationMode mode,
                                      std::vector<path::CalibrationOutcome>* outcomes) {
  return connector.capabilities(mode, outcomes);
}

std::string same_host_ways(PeerConnector& connector, const Device& d) {
  return connector.same_host_ways(d);
}

}  // namespace hmc
