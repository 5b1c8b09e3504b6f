#include "coll/reduce.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "coll/schedule.h"

namespace hmc::coll {
namespace {

// binary16 and bfloat16 are reduced in f32: each element widens, combines, and rounds back to
// nearest-even once, as a device reducing in f32 registers would.
float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);  // inf, or NaN keeping its payload's top bits
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal: normalise into f32's range
    int shift = 0;
    while (!(man & 0x400)) {
      man <<= 1;
      ++shift;
    }
    bits = sign | uint32_t(113 - shift) << 23 | ((man & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint16_t sign = uint16_t((bits >> 16) & 0x8000);
  uint32_t exp = (bits >> 23) & 0xff, man = bits & 0x7fffff;
  if (exp == 0xff) return uint16_t(sign | 0x7c00 | (man ? 0x200 | (man >> 13) : 0));
  int e = int(exp) - 127 + 15;
  if (e >= 0x1f) return uint16_t(sign | 0x7c00);  // overflow: infinity
  if (e <= 0) {                                   // subnormal or zero in binary16
    if (e < -10) return sign;
    man |= 0x800000;
    uint32_t shift = uint32_t(14 - e);
    uint32_t half = man >> shift, rest = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rest > mid || (rest == mid && (half & 1))) ++half;
    return uint16_t(sign | half);
  }
  uint32_t half = uint32_t(e) << 10 | (man >> 13), rest = man & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;  // may carry into inf: right
  return uint16_t(sign | half);
}

float bf16_to_float(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x40);  // quiet NaN
  bits += 0x7fff + ((bits >> 16) & 1);
  return uint16_t(bits >> 16);
}

struct Half {
  static float load(uint16_t v) { return half_to_float(v); }
  static uint16_t store(float v) { return float_to_half(v); }
};
struct BFloat {
  static float load(uint16_t v) { return bf16_to_float(v); }
  static uint16_t store(float v) { return float_to_bf16(v); }
};

// Integers wrap on overflow (computed unsigned, where it is defined); floats propagate NaN in
// min and max so that a NaN on any rank shows in the result whatever the order of reduction.
template <typename T>
T combine(T a, T b, hmc_reduce_op_t op) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case HMC_OP_PROD: return T(U(a) * U(b));
      case HMC_OP_MIN: return b < a ? b : a;
      case HMC_OP_MAX: return b > a ? b : a;
      case HMC_OP_BAND: return T(a & b);
      case HMC_OP_BOR: return T(a | b);
      case HMC_OP_BXOR: return T(a ^ b);
      default: return T(U(a) + U(b));  // SUM and AVG
    }
  } else {
    switch (op) {
      case HMC_OP_PROD: return a * b;
      case HMC_OP_MIN: return (b < a || b != b) ? b : a;
      case HMC_OP_MAX: return (b > a || b != b) ? b : a;
      default: return a + b;
    }
  }
}

// One loop per operation, so that the switch is outside and the loop body vectorises.
template <typename T, hmc_reduce_op_t Op>
void reduce_loop(T* __restrict d, const T* __restrict s, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = combine(d[i], s[i], Op);
}

template <typename T>
void reduce_typed(void* dst, const void* src, size_t n, hmc_reduce_op_t op) {
  T* d = static_cast<T*>(dst);
  const T* s = static_cast<const T*>(src);
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case HMC_OP_BAND: return reduce_loop<T, HMC_OP_BAND>(d, s, n);
      case HMC_OP_BOR: return reduce_loop<T, HMC_OP_BOR>(d, s, n);
      case HMC_OP_BXOR: return reduce_loop<T, HMC_OP_BXOR>(d, s, n);
      default: break;
    }
  }
  switch (op) {
    case HMC_OP_PROD: reduce_loop<T, HMC_OP_PROD>(d, s, n); break;
    case HMC_OP_MIN: reduce_loop<T, HMC_OP_MIN>(d, s, n); break;
    case HMC_OP_MAX: reduce_loop<T, HMC_OP_MAX>(d, s, n); break;
    default: reduce_loop<T, HMC_OP_SUM>(d, s, n); break;  // SUM and AVG
  }
}

// 16-bit floats: widen a block into f32 scratch, reduce there, round back.
template <typename Conv>
void reduce_16(void* dst, const void* src, size_t n, hmc_reduce_op_t op) {
  constexpr size_t kBlock = 512;
  float a[kBlock], b[kBlock];
  auto* d = static_cast<uint16_t*>(dst);
  auto* s = static_cast<const uint16_t*>(src);
  for (size_t base = 0; base < n; base += kBlock) {
    size_t m = n - base < kBlock ? n - base : kBlock;
    for (size_t i = 0; i < m; ++i) {
      a[i] = Conv::load(d[base + i]);
      b[i] = Conv::load(s[base + i]);
    }
    reduce_typed<float>(a, b, m, op);
    for (size_t i = 0; i < m; ++i) d[base + i] = Conv::store(a[i]);
  }
}

template <typename T>
void divide(void* data, size_t n, int by) {
  T* p = static_cast<T*>(data);
  for (size_t i = 0; i < n; ++i) p[i] = T(p[i] / T(by));
}

template <typename Conv>
void divide_16(void* data, size_t n, int by) {
  auto* p = static_cast<uint16_t*>(data);
  for (size_t i = 0; i < n; ++i) p[i] = Conv::store(Conv::load(p[i]) / float(by));
}

}  // namespace

size_t dtype_size(hmc_dtype_t dtype) {
  switch (dtype) {
    case HMC_DTYPE_F64:
    case HMC_DTYPE_I64: return 8;
    case HMC_DTYPE_F32:
    case HMC_DTYPE_I32: return 4;
    case HMC_DTYPE_F16:
    case HMC_DTYPE_BF16: return 2;
    case HMC_DTYPE_I8:
    case HMC_DTYPE_U8: return 1;
  }
  return 0;
}

bool valid_dtype(hmc_dtype_t dtype) {
  return dtype_size(dtype) != 0;
}

bool valid_op(hmc_reduce_op_t op) {
  switch (op) {
    case HMC_OP_SUM:
    case HMC_OP_PROD:
    case HMC_OP_MIN:
    case HMC_OP_MAX:
    case HMC_OP_AVG:
    case HMC_OP_BAND:
    case HMC_OP_BOR:
    case HMC_OP_BXOR: return true;
  }
  return false;
}

bool bitwise_op(hmc_reduce_op_t op) {
  return op == HMC_OP_BAND || op == HMC_OP_BOR || op == HMC_OP_BXOR;
}

bool integer_dtype(hmc_dtype_t dtype) {
  return dtype == HMC_DTYPE_I8 || dtype == HMC_DTYPE_U8 || dtype == HMC_DTYPE_I32 ||
         dtype == HMC_DTYPE_I64;
}

bool valid_op_for(hmc_dtype_t dtype, hmc_reduce_op_t op) {
  return valid_dtype(dtype) && valid_op(op) && (!bitwise_op(op) || integer_dtype(dtype));
}

const char* dtype_name(hmc_dtype_t dtype) {
  switch (dtype) {
    case HMC_DTYPE_F32: return "float32";
    case HMC_DTYPE_F64: return "float64";
    case HMC_DTYPE_F16: return "float16";
    case HMC_DTYPE_BF16: return "bfloat16";
    case HMC_DTYPE_I8: return "int8";
    case HMC_DTYPE_U8: return "uint8";
    case HMC_DTYPE_I32: return "int32";
    case HMC_DTYPE_I64: return "int64";
  }
  return "unknown";
}

const char* reduce_op_name(hmc_reduce_op_t op) {
  switch (op) {
    case HMC_OP_SUM: return "sum";
    case HMC_OP_PROD: return "prod";
    case HMC_OP_MIN: return "min";
    case HMC_OP_MAX: return "max";
    case HMC_OP_AVG: return "avg";
    case HMC_OP_BAND: return "band";
    case HMC_OP_BOR: return "bor";
    case HMC_OP_BXOR: return "bxor";
  }
  return "unknown";
}

hmc_status_t reduce_into(void* dst, const void* src, size_t count, hmc_dtype_t dtype,
                         hmc_reduce_op_t op) {
  if (!valid_op_for(dtype, op)) return HMC_ERR_INVALID_ARGUMENT;
  switch (dtype) {
    case HMC_DTYPE_F32: reduce_typed<float>(dst, src, count, op); break;
    case HMC_DTYPE_F64: reduce_typed<double>(dst, src, count, op); break;
    case HMC_DTYPE_F16: reduce_16<Half>(dst, src, count, op); break;
    case HMC_DTYPE_BF16: reduce_16<BFloat>(dst, src, count, op); break;
    case HMC_DTYPE_I8: reduce_typed<int8_t>(dst, src, count, op); break;
    case HMC_DTYPE_U8: reduce_typed<uint8_t>(dst, src, count, op); break;
    case HMC_DTYPE_I32: reduce_typed<int32_t>(dst, src, count, op); break;
    case HMC_DTYPE_I64: reduce_typed<int64_t>(dst, src, count, op); break;
    default: return HMC_ERR_INVALID_ARGUMENT;
  }
  return HMC_SUCCESS;
}

hmc_status_t finish_average(void* data, size_t count, hmc_dtype_t dtype, int n) {
  if (n <= 0) return HMC_ERR_INVALID_ARGUMENT;
  switch (dtype) {
    case HMC_DTYPE_F32: divide<float>(data, count, n); break;
    case HMC_DTYPE_F64: divide<double>(data, count, n); break;
    case HMC_DTYPE_F16: divide_16<Half>(data, count, n); break;
    case HMC_DTYPE_BF16: divide_16<BFloat>(data, count, n); break;
    case HMC_DTYPE_I8: divide<int8_t>(data, count, n); break;
    case HMC_DTYPE_U8: divide<uint8_t>(data, count, n); break;
    case HMC_DTYPE_I32: divide<int32_t>(data, count, n); break;
    case HMC_DTYPE_I64: divide<int64_t>(data, count, n); break;
    default: return HMC_ERR_INVALID_ARGUMENT;
  }
  return HMC_SUCCESS;
}

}  // namespace hmc::coll
