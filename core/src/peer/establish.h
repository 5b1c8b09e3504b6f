// Connect and accept (peer/establish.cpp has the exchange): the control connection, hello and
// token challenge, capabilities, the acceptor's path choice, the data endpoint. The peers it
// makes are handed back unregistered: the context registers them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "control/channel.h"
#include "control/handshake.h"
#include "net/net_plugin.h"
#include "path/calibrate.h"
#include "path/device_modes.h"
#include "path/path.h"
#include "peer/address.h"
#include "peer/peer.h"
#include "plugin/loader.h"
#include "util/config.h"

namespace hmc {

class Context;
struct Device;

// What connect and accept need of the context that owns them.
class EstablishServices {
 public:
  virtual ~EstablishServices() = default;
  // The device plugins' copy figures; with measure false only what is known already.
  virtual const std::vector<path::CopyRecord>& copy_records(bool measure) = 0;
};

class PeerConnector {
 public:
  struct Settings {
    Context* owner = nullptr;  // stamped on each Peer (the API finds its context there)
    const Config* config = nullptr;
    const plugin::Loader* loader = nullptr;
    const std::vector<std::unique_ptr<NetPlugin>>* nets = nullptr;
    path::Capabilities caps;  // this side's declared record
    std::string auth_token;   // HMC_AUTH_TOKEN
    std::string forced_path;  // HMC_PATH
    uint64_t context_id = 0;
    int timeout_ms = 0;  // HMC_TIMEOUT_MS
  };
  PeerConnector(EstablishServices& services, Settings settings)
      : services_(services), s_(std::move(settings)) {}

  // group_link: the connection is for collectives (path::kFeatureGroupLink in the Caps sent).
  hmc_status_t connect(const Address& addr, int timeout_ms, std::shared_ptr<Peer>* out,
                       bool group_link = false);

  // One incoming connector, from accept(2) to a finished peer: hello (and token challenge),
  // capabilities, path choice, data endpoint. Advanced by advance() without ever waiting, so
  // that one listener runs many at once (peer/incoming.h). It owns what it made (the channel,
  // the plugin's listener and endpoint) until the peer is made; destroying it midway closes
  // them.
  class Arrival {
   public:
    enum class Stage { Hello, Caps, DataPath };
    ~Arrival();
    Stage stage() const { return stage_; }
    // "tcp 192.0.2.7:40112", "unix pid 4242": who connected, for messages.
    const std::string& remote() const { return remote_; }
    int fd() const { return ch_->fd(); }
    bool wants_write() const { return ch_->want_write(); }
    bool heard() const { return ch_->received_bytes() > 0; }
    uint64_t started_ns() const { return started_ns_; }
    // When the current stage gives up: HMC_HANDSHAKE_TIMEOUT_MS after accept(2) for the hello,
    // HMC_TIMEOUT_MS after the hello for the rest (the connector measures its links then).
    uint64_t deadline_ns() const { return deadline_ns_; }

   private:
    friend class PeerConnector;
    Arrival(std::unique_ptr<control::Channel> ch, std::string remote, control::AcceptorHandshake hs,
            uint64_t now, uint64_t deadline)
        : ch_(std::move(ch)),
          remote_(std::move(remote)),
          hs_(std::move(hs)),
          started_ns_(now),
          deadline_ns_(deadline) {}
    std::unique_ptr<control::Channel> ch_;
    std::string remote_;
    control::AcceptorHandshake hs_;
    Stage stage_ = Stage::Hello;
    uint64_t started_ns_;
    uint64_t deadline_ns_;
    control::HelloInfo theirs_;
    path::Capabilities remote_caps_;
    path::Choice choice_;
    NetDevice* dev_ = nullptr;
    hmc_net_listener_t* listener_ = nullptr;        // the plugin's, until the endpoint is accepted
    hmc_net_ep_t* ep_ = nullptr;                    // until handed to the peer
    bool net_ready_ = false;                        // the connector's NetReady arrived
    std::vector<control::Channel::Message> extra_;  // sent after NetReady
  };
  // Starts the setup of a connector that accept(2) returned; handshake_timeout_ms bounds its
  // hello.
  std::unique_ptr<Arrival> arrive(control::Fd fd, std::string remote, int handshake_timeout_ms);
  // Advances an arrival with what its socket and plugin have now; never waits. HMC_IN_PROGRESS
  // while it goes on; HMC_SUCCESS once *out is the peer (unregistered) and *extra holds the
  // messages it sent after NetReady, to be dispatched once it is registered; otherwise the
  // failure (HMC_ERR_TIMEOUT past its deadline), with last_error naming the connector, the
  // stage and the reason. A failed arrival is only to be destroyed.
  hmc_status_t advance(Arrival& a, std::shared_ptr<Peer>* out,
                       std::vector<control::Channel::Message>* extra);

  // This side's capability record as peers receive it (peer/capabilities.h).
  path::Capabilities capabilities(path::CalibrationMode mode,
                                  std::vector<path::CalibrationOutcome>* outcomes);
  // How device d's memory would cross to another process like this one (peer/capabilities.h).
  std::string same_host_ways(const Device& d);

 private:
  NetDevice* find_device(const std::string& plugin, const std::string& dev);
  hmc_status_t on_message(Arrival& a, control::Channel::Message& m);
  hmc_status_t on_caps(Arrival& a, const control::Channel::Message& m);
  hmc_status_t on_data_path_message(Arrival& a, control::Channel::Message& m);
  hmc_status_t arrival_failed(Arrival& a, hmc_status_t st);
  std::shared_ptr<Peer> make_peer(std::unique_ptr<control::Channel> ch,
                                  const control::HelloInfo& hello, const path::Capabilities& remote,
                                  const path::Choice& choice, NetDevice* dev, hmc_net_ep_t* ep,
                                  const std::string& address);

  EstablishServices& services_;
  const Settings s_;
};

}  // namespace hmc
