// Reductions where the destination or the source is device memory, which the host cannot
// dereference: dst = dst op src over `count` elements, for the executor's reducing receives
// into a device-resident output.
//
//  - On the device, where dst's device plugin offers the reduce slot (hmc/plugin/device.h) and
//    src is on that device (one reduction) or in host memory (pieces of src go host-to-device
//    into a device buffer, the upload of piece k+1 overlapping the device's reduction of piece k).
//  - Staged otherwise, and where the plugin declines the datatype or operation: pieces of the
//    staging pool's chunk (HMC_STAGE_CHUNK) go device-to-host into pinned buffers, the host
//    reduces them (coll/reduce.h) and the result goes back host-to-device, up to
//    HMC_STAGE_DEPTH pieces in flight: piece k+1 is copied in while piece k reduces and piece
//    k-1 goes back.
//
// Blocks until the result is in dst, bounded by HMC_TIMEOUT_MS (the copy settings' timeout).
#pragma once

#include <cstddef>

#include "hmc/hmc.h"

namespace hmc {
class DeviceRegistry;
}

namespace hmc::coll {

enum class ReducedOn { Host, Device, Staged };

// dst = dst op src (HMC_OP_AVG sums; the caller divides at the end). Host memory on both sides
// is reduced in place. *how (optional) says where it ran. Errors: the copies' and the plugin's
// (message set), HMC_ERR_TIMEOUT, HMC_ERR_INVALID_ARGUMENT for an unknown dtype or op, or
// a bitwise op on a floating type. Bitwise ops are reduced on the host (device.h lacks them).
hmc_status_t reduce_memory(DeviceRegistry& devices, void* dst, const void* src, size_t count,
                           hmc_dtype_t dtype, hmc_reduce_op_t op, ReducedOn* how = nullptr);

}  // namespace hmc::coll
