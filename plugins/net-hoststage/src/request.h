// One non-blocking operation (hmc_net_request_t). Owned by its endpoint from post until test
// reports it done (then freed) or until close_ep (then freed unreported).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "hmc/plugin/common.h"
#include "wire.h"

namespace hmc::hoststage {

class Endpoint;

enum class ReqKind : uint8_t { kSend, kRecv, kPut, kGet, kPutV, kGetV };

struct Request {
  Endpoint* ep = nullptr;
  Request* prev = nullptr;  // the endpoint's list of live requests
  Request* next = nullptr;
  Request* pprev = nullptr;  // the endpoint's posted-receive list (unmatched receives)
  Request* pnext = nullptr;
  ReqKind kind = ReqKind::kSend;
  bool done = false;
  bool posted = false;          // receive waiting for a message (cancellable)
  bool tracked = false;         // in the endpoint's id table (awaits a reply)
  bool has_sink = false;        // get: a data sink under `id` exists
  bool bulk_completes = false;  // send: ends when all bulk bytes were written
  hmc_plugin_status_t result = HMC_PLUGIN_SUCCESS;
  uint64_t id = 0;
  uint64_t tag = 0;
  uint8_t* buf = nullptr;  // the caller's buffer (read-only for send/put)
  size_t len = 0;
  size_t bytes = 0;         // reported by test
  uint64_t msg_len = 0;     // receive: size of the matched message
  uint64_t bulk_total = 0;  // bytes this side streams as DATA chunks
  uint64_t bulk_written = 0;
  // Vectored put/get: its pieces as they went on the wire (aux: where each is here), kept until
  // it ends; the messages not answered yet, the first error an answer gave, and the bytes the
  // owner announced and that arrived as DATA (get). It ends once every message was answered and
  // every announced byte arrived, so nothing lands in its buffers afterwards.
  std::vector<VecPieceWire> vec;
  uint32_t parts_left = 0;
  hmc_plugin_status_t vec_status = HMC_PLUGIN_SUCCESS;
  uint64_t vec_expect = 0;
  uint64_t vec_got = 0;
};

}  // namespace hmc::hoststage
