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
    int timeout_ms = 0;       // HMC_TIMEOUT_MS
    int unix_listener = -1;
    int tcp_listener = -1;
  };
  PeerConnector(EstablishServices& services, Settings settings)
      : services_(services), s_(std::move(settings)) {}

  // group_link: the connection is for collectives (path::kFeatureGroupLink in the Caps sent).
  hmc_status_t connect(const Address& addr, int timeout_ms, std::shared_ptr<Peer>* out,
                       bool group_link = false);
  // One accept at a time (the caller serializes). Messages the peer sent after its NetReady go
  // to *extra, to be dispatched once the peer is registered.
  hmc_status_t accept(int timeout_ms, std::shared_ptr<Peer>* out,
                      std::vector<control::Channel::Message>* extra);

  // This side's capability record as peers receive it (peer/capabilities.h).
  path::Capabilities capabilities(path::CalibrationMode mode,
                                  std::vector<path::CalibrationOutcome>* outcomes);
  // How device d's memory would cross to another process like this one (peer/capabilities.h).
  std::string same_host_ways(const Device& d);

 private:
  NetDevice* find_device(const std::string& plugin, const std::string& dev);
  std::shared_ptr<Peer> make_peer(std::unique_ptr<control::Channel> ch,
                                  const control::HelloInfo& hello,
                                  const path::Capabilities& remote, const path::Choice& choice,
                                  NetDevice* dev, hmc_net_ep_t* ep);

  EstablishServices& services_;
  const Settings s_;
};

}  // namespace hmc
