// Host reductions of the collectives: dst[i] = dst[i] op src[i] for every hmc datatype and
// operation, written as plain loops the compiler vectorises (f16 and bf16 go through f32).
#pragma once

#include <cstddef>

#include "hmc/hmc.h"

namespace hmc::coll {

// dst = dst op src over `count` elements. HMC_OP_AVG sums here; finish_average divides at the
// end. HMC_ERR_INVALID_ARGUMENT for an unknown datatype or operation, or a bitwise operation on
// a floating type (nothing written).
hmc_status_t reduce_into(void* dst, const void* src, size_t count, hmc_dtype_t dtype,
                         hmc_reduce_op_t op);

// Divides `count` elements by `n` (the last step of HMC_OP_AVG). Integers round toward zero.
hmc_status_t finish_average(void* data, size_t count, hmc_dtype_t dtype, int n);

// Whether the datatype and operation are known (checked before anything is sent).
bool valid_dtype(hmc_dtype_t dtype);
bool valid_op(hmc_reduce_op_t op);
// HMC_OP_BAND, HMC_OP_BOR, HMC_OP_BXOR: defined on the integer datatypes only.
bool bitwise_op(hmc_reduce_op_t op);
bool integer_dtype(hmc_dtype_t dtype);
// Both known, and the operation defined on the datatype.
bool valid_op_for(hmc_dtype_t dtype, hmc_reduce_op_t op);
// Names for messages ("float32", "band"); "unknown" outside the enums.
const char* dtype_name(hmc_dtype_t dtype);
const char* reduce_op_name(hmc_reduce_op_t op);

}  // namespace hmc::coll
