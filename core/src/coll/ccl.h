// Collectives through a vendor's collective library (a ccl plugin, hmc/plugin/ccl.h): which
// collectives may go there, the vendor communicator each hmc communicator makes on first use
// (its unique id carried by hmc's own broadcast), and a collective running in the library,
// moved along by the progress engine like the executor's.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "coll/algorithms.h"
#include "hmc/hmc.h"
#include "hmc/plugin/ccl.h"
#include "request/request.h"

namespace hmc {
class Transfers;
}

namespace hmc::coll {

struct Communicator;

// HMC_COLL_BACKEND.
enum class Backend : uint8_t { Auto, Hmc, Ccl };
bool parse_backend(const std::string& text, Backend* out);  // "auto" (or ""), "hmc", "ccl"

// A loaded ccl plugin that serves devices here, as the collectives use it.
struct CclPlugin {
  const hmc_ccl_plugin_v1_t* table = nullptr;
  hmc_ccl_ctx_t* ctx = nullptr;
  std::string name;     // "nccl"
  std::string library;  // "libnccl.so.2, NCCL 2.28.9"
  std::string vendor;   // the device plugin whose memory it serves ("cuda")
};

// One rank's vendor communicator; destroyed with the hmc communicator.
class CclComm {
 public:
  CclComm(const CclPlugin& plugin, hmc_ccl_comm_t* comm, int device);
  ~CclComm();
  CclComm(const CclComm&) = delete;
  CclComm& operator=(const CclComm&) = delete;
  const CclPlugin& plugin() const { return plugin_; }
  hmc_ccl_comm_t* get() const { return comm_; }
  int device() const { return device_; }
  // Makes every rank leave the library (a rank lost, a timeout, a failure); idempotent.
  void abort();
  // "nccl (libnccl.so.2, NCCL 2.28.9)"
  const std::string& describe() const { return description_; }
  // What hmc_comm_last_backend says of a collective in it: "ccl " + describe().
  const std::string& backend() const { return backend_; }

 private:
  const CclPlugin& plugin_;
  hmc_ccl_comm_t* comm_;
  int device_;
  bool aborted_ = false;
  std::string description_, backend_;  // made once: every collective names them
};

// Where a communicator stands with the vendor library.
enum class CclStage : uint8_t {
  Untried,  // no collective wanted it yet
  Ready,    // the vendor communicator exists: eligible collectives go there
  Off,      // it could not be made (or a collective in it failed): hmc's algorithms only
};

struct CclState {
  std::mutex setup;  // one thread makes the vendor communicator
  CclStage stage = CclStage::Untried;
  const CclPlugin* plugin = nullptr;  // the plugin it was tried with
  std::unique_ptr<CclComm> comm;
  std::string why_off;  // Off: why, as logged
};

// The ccl plugin that could run this collective on this rank, or nullptr with *why saying why
// not: a kind the ABI has no call for, a dtype or operation outside the plugin's masks, a
// member of another vendor, or buffers that are not device memory of one device of its
// vendor. *device: the plugin's ordinal of the buffers' device.
struct CclEligible {
  const CclPlugin* plugin = nullptr;
  int device = -1;
  // No library takes it whatever is loaded (a barrier, nothing to move, host buffers): it runs
  // on hmc's algorithms even when HMC_COLL_BACKEND=ccl.
  bool hmc_only = false;
  std::string why;
};

// A collective running in a ccl plugin. Its request ends when the plugin's test says so, with
// the library's message on failure; a collective that outlives the timeout aborts the vendor
// communicator.
class CclRun {
 public:
  // what: the call ("hmc_all_reduce"); the run's full name is made only when a message needs it.
  CclRun(Transfers& transfers, std::shared_ptr<Communicator> comm, CclComm& ccl,
         hmc_ccl_request_t* creq, Request* req, const char* what, uint64_t bytes, int timeout_ms);
  bool advance();  // true when it ended in this call
  bool ended() const { return ended_; }
  Communicator& comm() { return *comm_; }
  // Whether req is the request this run ends, and what it is called in messages
  // ("hmc_all_reduce (8 bytes out, nccl (...), rank 0 of 2)").
  bool ends(const Request* req) const { return req_ == req; }
  std::string what() const;
  void abort(hmc_status_t status, const std::string& why);

 private:
  void end(hmc_status_t status, std::string error);

  Transfers& transfers_;
  std::shared_ptr<Communicator> comm_;
  CclComm& ccl_;
  hmc_ccl_request_t* creq_;
  Request* req_;
  std::string what_;
  uint64_t bytes_;
  uint64_t deadline_ns_;
  bool ended_ = false;
};

// Posts args on the vendor communicator. HMC_SUCCESS with *creq set, else the plugin's failure
// as an hmc error naming the library and the call (nothing posted).
hmc_status_t ccl_post(CclComm& ccl, const Communicator& comm, const CollArgs& args,
                      const void* input, void* output, const char* what, hmc_ccl_request_t** creq);

// hmc status for a plugin status.
hmc_status_t ccl_status(int plugin_status);

// The library's own words for the last failure on the communicator, or the plugin status when
// it gave none.
std::string ccl_error_text(const CclComm& ccl, int plugin_status);

}  // namespace hmc::coll
