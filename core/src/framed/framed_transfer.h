// A transfer that moves in pieces, through bounce buffers where the memory is a device the path
// cannot reach; owned by its Request. The two sides of a framed message (framed/framed_message.h)
// and puts and gets of local device memory in pieces (framed/pieced_rma.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "framed/bounce_pipeline.h"
#include "hmc/hmc.h"
#include "hmc/plugin/net.h"

namespace hmc {

struct Peer;
struct Request;

class FramedTransfer {
 public:
  virtual ~FramedTransfer();
  FramedTransfer(const FramedTransfer&) = delete;
  FramedTransfer& operator=(const FramedTransfer&) = delete;

  // Moves the transfer along; net mutex held; `req` owns it. Returns true when something
  // happened. A failure of the path (the plugin's status) ends it broken(), anything else
  // finished() with status().
  bool advance(Request* req, Peer& peer, const StageEnv& env) {
    if (end_ != End::Running) return false;
    return step(req, peer, env);
  }
  bool finished() const { return end_ == End::Finished; }
  bool broken() const { return end_ == End::Broken || end_ == End::Unmatched; }
  hmc_plugin_status_t plugin_status() const { return plugin_status_; }
  // broken() because a receive's piece 0 matched nothing before the path ended (PEER_LOST).
  bool unmatched() const { return end_ == End::Unmatched; }
  // The peer closed in order, so that is not the path's end: the receive ends with PEER_LOST
  // and the path stays for what did arrive. The bounces are returned by release().
  virtual void end_unmatched(Request* req, Peer& peer);
  hmc_status_t status() const { return status_; }
  const std::string& error() const { return error_; }
  size_t bytes() const { return bytes_; }
  // Whether anything of it went to the plugin.
  virtual bool started() const = 0;

  // Cancels the transfer if nothing of it matched yet: a send none of which left, or a receive
  // whose piece 0 has not matched (the plugin is asked to cancel it). NOT_SUPPORTED otherwise.
  hmc_plugin_status_t cancel(Request* req, Peer& peer) {
    if (end_ != End::Running) return HMC_PLUGIN_ERR_NOT_SUPPORTED;
    return cancel_step(req, peer);
  }
  // The peer's endpoint is gone: forget every plugin request (the plugin released them).
  void forget_plugin_requests() { pipe_.forget_plugin_requests(); }
  // Returns the bounce buffers of pieces that are done; true when it returned any.
  bool release(const StageEnv& env) { return pipe_.release(env); }
  // For a transfer that ended early (its peer failed): marks pieces whose device copies ended
  // as done and returns their buffers.
  virtual void settle(const StageEnv& env) { pipe_.settle(env); }
  // Nothing held any more: no piece in flight, no bounce buffer, no device copy running.
  bool idle() const { return pipe_.idle(); }

 protected:
  // How the transfer ended, if it did.
  enum class End {
    Running,
    Finished,   // status() says how
    Broken,     // the plugin failed: the peer's path is gone
    Unmatched,  // broken, by a receive's piece 0 that matched nothing (see unmatched())
  };

  FramedTransfer(void* user, size_t size) : user_(static_cast<uint8_t*>(user)), size_(size) {}
  virtual bool step(Request* req, Peer& peer, const StageEnv& env) = 0;
  virtual hmc_plugin_status_t cancel_step(Request* req, Peer& peer);
  // The first local failure decides the status; the transfer goes on to its end.
  void fail_local(hmc_status_t st, std::string why);
  void plugin_failed(hmc_plugin_status_t st) {
    end_ = End::Broken;
    plugin_status_ = st;
  }
  // Tests a posted plugin request: false while it runs; true once it ended, with *r cleared and
  // st and got saying how (the plugin released the request).
  static bool request_ended(const hmc_net_plugin_v2_t* t, hmc_net_request_t** r,
                            hmc_plugin_status_t* st, size_t* got) {
    int done = 0;
    *got = 0;
    *st = t->test(*r, &done, got);
    if (!done && *st == HMC_PLUGIN_SUCCESS) return false;
    *r = nullptr;
    return true;
  }

  BouncePipeline pipe_;
  uint8_t* user_ = nullptr;
  size_t size_ = 0;  // send, put, get: the transfer's size; receive: the buffer's capacity
  End end_ = End::Running;
  hmc_plugin_status_t plugin_status_ = HMC_PLUGIN_SUCCESS;
  hmc_status_t status_ = HMC_SUCCESS;
  std::string error_;
  size_t bytes_ = 0;
};

}  // namespace hmc
