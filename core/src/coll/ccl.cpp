#include "coll/ccl.h"

#include <fmt/format.h>

#include <vector>

#include "coll/comm.h"
#include "peer/peer.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/status.h"
#include "xfer/transfers.h"

namespace hmc::coll {

bool parse_backend(const std::string& text, Backend* out) {
  if (text.empty() || text == "auto")
    *out = Backend::Auto;
  else if (text == "hmc")
    *out = Backend::Hmc;
  else if (text == "ccl")
    *out = Backend::Ccl;
  else
    return false;
  return true;
}

hmc_status_t ccl_status(int st) {
  switch (st) {
    case HMC_PLUGIN_SUCCESS: return HMC_SUCCESS;
    case HMC_PLUGIN_ERR_INVALID_ARGUMENT: return HMC_ERR_INVALID_ARGUMENT;
    case HMC_PLUGIN_ERR_NOT_SUPPORTED: return HMC_ERR_NOT_SUPPORTED;
    case HMC_PLUGIN_ERR_NO_MEMORY: return HMC_ERR_NO_MEMORY;
    case HMC_PLUGIN_ERR_PEER_LOST: return HMC_ERR_PEER_LOST;
    case HMC_PLUGIN_ERR_CANCELLED: return HMC_ERR_CANCELLED;
    case HMC_PLUGIN_ERR_SYSTEM: return HMC_ERR_SYSTEM;
    default: return HMC_ERR_PLUGIN;
  }
}

CclComm::~CclComm() {
  int st = plugin_.table->comm_destroy(comm_);
  if (st != HMC_PLUGIN_SUCCESS)
    HMC_LOG_W("ccl plugin '{}': comm_destroy failed ({})", plugin_.name, st);
}

void CclComm::abort() {
  if (aborted_) return;
  aborted_ = true;
  plugin_.table->comm_abort(comm_);
}

CclComm::CclComm(const CclPlugin& plugin, hmc_ccl_comm_t* comm, int device)
    : plugin_(plugin),
      comm_(comm),
      device_(device),
      description_(plugin.library.empty() ? plugin.name
                                          : fmt::format("{} ({})", plugin.name, plugin.library)),
      backend_("ccl " + description_) {}

std::string ccl_error_text(const CclComm& ccl, int st) {
  const char* text = ccl.plugin().table->comm_error_text(ccl.get());
  if (text && *text) return text;
  return fmt::format("plugin status {}", st);
}

hmc_status_t ccl_post(CclComm& ccl, const Communicator& comm, const CollArgs& args,
                      const void* input, void* output, const char* what, hmc_ccl_request_t** creq) {
  const hmc_ccl_plugin_v1_t* t = ccl.plugin().table;
  hmc_ccl_comm_t* c = ccl.get();
  const uint32_t dtype = uint32_t(args.dtype), op = uint32_t(args.op);
  const size_t es = dtype_size(args.dtype);
  int st = HMC_PLUGIN_ERR_NOT_SUPPORTED;
  const char* call = "?";
  switch (args.kind) {
    case CollKind::AllReduce:
      call = "all_reduce";
      st = t->all_reduce(c, input, output, args.count, dtype, op, args.stream, creq);
      break;
    case CollKind::AllGather:
      call = "all_gather";
      st = t->all_gather(c, input, output, args.count, dtype, args.stream, creq);
      break;
    case CollKind::ReduceScatter:
      call = "reduce_scatter";
      st = t->reduce_scatter(c, input, output, args.count, dtype, op, args.stream, creq);
      break;
    case CollKind::Broadcast:
      call = "broadcast";
      st = t->broadcast(c, input, output, args.count, dtype, args.root, args.stream, creq);
      break;
    case CollKind::AllToAll:
    case CollKind::AllToAllV: {
      call = "send_recv";
      std::vector<hmc_ccl_p2p_t> parts;
      auto* in = static_cast<uint8_t*>(const_cast<void*>(input));
      auto* out = static_cast<uint8_t*>(output);
      for (int r = 0; r < comm.size; ++r) {
        bool v = args.kind == CollKind::AllToAllV;
        size_t sc = v ? args.send_counts[size_t(r)] : args.count;
        size_t sd = v ? args.send_displs[size_t(r)] : size_t(r) * args.count;
        size_t rc = v ? args.recv_counts[size_t(r)] : args.count;
        size_t rd = v ? args.recv_displs[size_t(r)] : size_t(r) * args.count;
        parts.push_back({r, 1, in + sd * es, sc});
        parts.push_back({r, 0, out + rd * es, rc});
      }
      st = t->send_recv(c, parts.data(), parts.size(), dtype, args.stream, creq);
      break;
    }
    case CollKind::Reduce:  // not in the plugin ABI: ccl_eligible keeps it on hmc's algorithms
    case CollKind::Barrier: break;
  }
  if (st == HMC_PLUGIN_SUCCESS) return HMC_SUCCESS;
  return fail(ccl_status(st), "{} (rank {} of {}): {} {}: {}", what, comm.rank, comm.size,
              ccl.describe(), call, ccl_error_text(ccl, st));
}

CclRun::CclRun(Transfers& transfers, std::shared_ptr<Communicator> comm, CclComm& ccl,
               hmc_ccl_request_t* creq, Request* req, const char* what, uint64_t bytes,
               int timeout_ms)
    : transfers_(transfers),
      comm_(std::move(comm)),
      ccl_(ccl),
      creq_(creq),
      req_(req),
      what_(what),
      bytes_(bytes),
      deadline_ns_(deadline_after_ms(timeout_ms)) {}

std::string CclRun::what() const {
  return fmt::format("{} ({} bytes out, {}, rank {} of {})", what_, bytes_, ccl_.describe(),
                     comm_->rank, comm_->size);
}

bool CclRun::advance() {
  if (ended_) return false;
  int done = 0;
  int st = ccl_.plugin().table->test(creq_, &done);
  if (!done) {
    // A rank lost on hmc's paths will never finish its part: leave the library now rather than
    // at the library's own timeout.
    for (size_t r = 0; st == HMC_PLUGIN_SUCCESS && r < comm_->peers.size(); ++r) {
      const auto& peer = comm_->peers[r];
      if (peer && peer->lost.load(std::memory_order_acquire)) {
        abort(HMC_ERR_PEER_LOST,
              fmt::format("{}: rank {} (pid {}) was lost; the vendor communicator is aborted",
                          what(), r, comm_->members[r].pid));
        return true;
      }
    }
    if (st == HMC_PLUGIN_SUCCESS && now_ns() < deadline_ns_) return false;
    // The request stays the plugin's: aborting ends it, and the communicator goes with it.
    abort(HMC_ERR_TIMEOUT,
          fmt::format("{}: the library did not finish it within the timeout", what()));
    return true;
  }
  creq_ = nullptr;
  if (st == HMC_PLUGIN_SUCCESS) {
    end(HMC_SUCCESS, "");
    return true;
  }
  std::string why = fmt::format("{}: {}", what(), ccl_error_text(ccl_, st));
  abort(ccl_status(st), why);
  return true;
}

void CclRun::abort(hmc_status_t status, const std::string& why) {
  if (ended_) return;
  // No rank may stay inside the library: abort the vendor communicator, and the hmc one is
  // unusable from now on (its ranks no longer agree on what ran).
  ccl_.abort();
  if (comm_->broken.empty()) {
    comm_->broken = why;
    HMC_LOG_W("{}; the communicator is unusable from now on", why);
  }
  set_error(status, why);
  end(status, why);
}

void CclRun::end(hmc_status_t status, std::string error) {
  ended_ = true;
  --comm_->running;
  req_->bytes = status == HMC_SUCCESS ? bytes_ : 0;
  req_->status = status;
  req_->error = std::move(error);
  req_->done.store(true, std::memory_order_release);
  transfers_.events().ring();
}

}  // namespace hmc::coll
