// Transfer lists (hmc_xfer_prepare): many ranges between one local region and one remote region,
// checked and merged once, posted many times as one request (Transfers::post_list).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "framed/pieced_rma.h"
#include "hmc/hmc.h"
#include "net/region.h"

namespace hmc {

struct XferList {
  Region* local = nullptr;
  Remote* remote = nullptr;
  bool put = true;  // else a get
  // Ranges in post order, adjacent ones merged; shared with the transfers still running, so
  // that releasing the list never pulls them from under a request.
  std::shared_ptr<const std::vector<RmaSpan>> spans;
  // The same ranges as vectored pieces (Transfers::vectorize_list), for a path that offers
  // iput_v/iget_v and reaches the local region directly; null otherwise.
  std::shared_ptr<const VecPieces> vec;
  uint64_t total = 0;    // bytes moved by one post
  size_t described = 0;  // descriptors the application gave
};

// Checks every descriptor against both regions (nothing is kept when one is out of bounds) and
// merges ranges adjacent on both sides. HMC_ERR_OUT_OF_BOUNDS names the first bad descriptor;
// HMC_ERR_INVALID_ARGUMENT for a list that moves nothing.
hmc_status_t make_xfer_list(Region* local, Remote* remote, hmc_xfer_op_t op,
                            const hmc_xfer_desc_t* descs, size_t count,
                            std::unique_ptr<XferList>* out);

}  // namespace hmc
