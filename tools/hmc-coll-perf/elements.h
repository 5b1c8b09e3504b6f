// What the collectives' benchmarks put in their buffers: the datatypes and reductions by name,
// element access in any datatype through doubles, and the values a check writes and expects.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "hmc/hmc.h"

namespace coll_bench {

struct Dtype {
  const char* name;
  hmc_dtype_t type;
  size_t size;
};
// hmc's datatypes under their nccl-tests names (float, double, half, bfloat16, int8, uint8,
// int32, int64).
const std::vector<Dtype>& dtypes();
// By name, nccl-tests' aliases included (fp32, float32, fp16, bf16, char, int, ...); nullptr
// when hmc has no such datatype.
const Dtype* find_dtype(const std::string& name);

struct Redop {
  const char* name;
  hmc_reduce_op_t op;
};
const std::vector<Redop>& redops();  // sum, prod, max, min, avg (nccl-tests' order)
const Redop* find_redop(const std::string& name);

void store(void* p, uint64_t i, double v, hmc_dtype_t t);
double load(const void* p, uint64_t i, hmc_dtype_t t);

// The input element i of `rank` for a check: small integers, exact in every datatype and in
// their reductions over a few ranks (products stay powers of two).
double input(hmc_reduce_op_t op, int rank, uint64_t i);
// Element i of the reduction over n ranks' inputs.
double reduced(hmc_reduce_op_t op, int n, uint64_t i);
// Whether a result element matches: exactly, except an average in a floating-point type, which
// the library may round differently from this reference (within the type's precision).
bool matches(double got, double want, hmc_reduce_op_t op, hmc_dtype_t t);

}  // namespace coll_bench
