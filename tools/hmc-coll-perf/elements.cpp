#include "elements.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace coll_bench {

const std::vector<Dtype>& dtypes() {
  static const std::vector<Dtype> v = {{"float", HMC_DTYPE_F32, 4}, {"double", HMC_DTYPE_F64, 8},
                                       {"half", HMC_DTYPE_F16, 2},  {"bfloat16", HMC_DTYPE_BF16, 2},
                                       {"int8", HMC_DTYPE_I8, 1},   {"uint8", HMC_DTYPE_U8, 1},
                                       {"int32", HMC_DTYPE_I32, 4}, {"int64", HMC_DTYPE_I64, 8}};
  return v;
}

const Dtype* find_dtype(const std::string& name) {
  static const std::pair<const char*, const char*> aliases[] = {
      {"fp32", "float"},     {"float32", "float"}, {"fp64", "double"},
      {"float64", "double"}, {"fp16", "half"},     {"float16", "half"},
      {"bf16", "bfloat16"},  {"char", "int8"},     {"int", "int32"}};
  std::string n = name;
  for (const auto& a : aliases)
    if (n == a.first) n = a.second;
  for (const auto& d : dtypes())
    if (n == d.name) return &d;
  return nullptr;
}

const std::vector<Redop>& redops() {
  static const std::vector<Redop> v = {{"sum", HMC_OP_SUM},
                                       {"prod", HMC_OP_PROD},
                                       {"max", HMC_OP_MAX},
                                       {"min", HMC_OP_MIN},
                                       {"avg", HMC_OP_AVG}};
  return v;
}

const Redop* find_redop(const std::string& name) {
  for (const auto& r : redops())
    if (name == r.name) return &r;
  return nullptr;
}

void store(void* p, uint64_t i, double v, hmc_dtype_t t) {
  switch (t) {
    case HMC_DTYPE_F32: static_cast<float*>(p)[i] = float(v); break;
    case HMC_DTYPE_F64: static_cast<double*>(p)[i] = v; break;
    case HMC_DTYPE_I8: static_cast<int8_t*>(p)[i] = int8_t(v); break;
    case HMC_DTYPE_U8: static_cast<uint8_t*>(p)[i] = uint8_t(v); break;
    case HMC_DTYPE_I32: static_cast<int32_t*>(p)[i] = int32_t(v); break;
    case HMC_DTYPE_I64: static_cast<int64_t*>(p)[i] = int64_t(v); break;
    case HMC_DTYPE_BF16: {
      float f = float(v);
      uint32_t b;
      memcpy(&b, &f, 4);
      static_cast<uint16_t*>(p)[i] = uint16_t(b >> 16);  // exact for the inputs' small integers
      break;
    }
    case HMC_DTYPE_F16: {
      // Non-negative integers below 2048 are exact in binary16.
      uint32_t n = uint32_t(v);
      uint16_t h = 0;
      if (n) {
        int e = 31 - __builtin_clz(n);
        h = uint16_t((e + 15) << 10 | ((n - (1u << e)) << (10 - e)));
      }
      static_cast<uint16_t*>(p)[i] = h;
      break;
    }
  }
}

double load(const void* p, uint64_t i, hmc_dtype_t t) {
  switch (t) {
    case HMC_DTYPE_F32: return static_cast<const float*>(p)[i];
    case HMC_DTYPE_F64: return static_cast<const double*>(p)[i];
    case HMC_DTYPE_I8: return static_cast<const int8_t*>(p)[i];
    case HMC_DTYPE_U8: return static_cast<const uint8_t*>(p)[i];
    case HMC_DTYPE_I32: return static_cast<const int32_t*>(p)[i];
    case HMC_DTYPE_I64: return double(static_cast<const int64_t*>(p)[i]);
    case HMC_DTYPE_BF16: {
      uint32_t b = uint32_t(static_cast<const uint16_t*>(p)[i]) << 16;
      float f;
      memcpy(&f, &b, 4);
      return f;
    }
    case HMC_DTYPE_F16: {
      uint16_t h = static_cast<const uint16_t*>(p)[i];
      int e = (h >> 10) & 31;
      double m = h & 1023;
      return e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
    }
  }
  return 0;
}

double input(hmc_reduce_op_t op, int rank, uint64_t i) {
  if (op == HMC_OP_PROD) return (i + uint64_t(rank)) % 4 == 0 ? 2 : 1;
  return double((rank + 1) * int(1 + i % 3));
}

double reduced(hmc_reduce_op_t op, int n, uint64_t i) {
  double acc = input(op, 0, i);
  for (int r = 1; r < n; ++r) {
    double v = input(op, r, i);
    if (op == HMC_OP_SUM || op == HMC_OP_AVG)
      acc += v;
    else if (op == HMC_OP_PROD)
      acc *= v;
    else if (op == HMC_OP_MIN)
      acc = std::min(acc, v);
    else
      acc = std::max(acc, v);
  }
  return op == HMC_OP_AVG ? acc / n : acc;
}

bool matches(double got, double want, hmc_reduce_op_t op, hmc_dtype_t t) {
  bool floating =
      t == HMC_DTYPE_F32 || t == HMC_DTYPE_F64 || t == HMC_DTYPE_F16 || t == HMC_DTYPE_BF16;
  if (op != HMC_OP_AVG) return got == want;
  if (!floating) return got == std::trunc(want);  // integers: rounded toward zero
  double eps = t == HMC_DTYPE_F64   ? 1e-12
               : t == HMC_DTYPE_F32 ? 1e-6
               : t == HMC_DTYPE_F16 ? 1e-3
                                    : 8e-3;
  return std::fabs(got - want) <= eps * std::max(1.0, std::fabs(want));
}

}  // namespace coll_bench
