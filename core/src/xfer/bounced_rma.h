// Puts and gets of local device memory the path cannot reach, to or from remote memory it can:
// pieces of a chunk each through bounce buffers, StageEnv::depth in flight (put: device-to-host
// copy, then iput; get: iget, then host-to-device copy). The target sees ordinary puts and gets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "hmc/plugin/net.h"
#include "xfer/framed_transfer.h"

namespace hmc {

class BouncedRma final : public FramedTransfer {
 public:
  // `addr`, `rkey`: the remote registration's address of the first byte, and its key.
  static std::unique_ptr<BouncedRma> put(const void* buf, size_t size, uint64_t addr,
                                         hmc_net_rkey_t* rkey, uint64_t chunk);
  static std::unique_ptr<BouncedRma> get(void* buf, size_t size, uint64_t addr,
                                         hmc_net_rkey_t* rkey, uint64_t chunk);
  bool started() const override { return next_index_ > 0; }

 private:
  BouncedRma(bool put, void* buf, size_t size, uint64_t addr, hmc_net_rkey_t* rkey, uint64_t chunk);
  bool step(Request* req, Peer& peer, const StageEnv& env) override;
  bool issue_pieces(Peer& peer, const StageEnv& env);

  bool put_;  // else a get
  uint64_t addr_;
  hmc_net_rkey_t* rkey_;
  uint64_t chunk_;
  size_t pieces_;
  size_t next_index_ = 0;  // next piece to issue
};

}  // namespace hmc
