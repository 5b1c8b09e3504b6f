// The collectives' host reductions: every datatype and operation against a reference computed
// element by element, the 16-bit float conversions, and refusal of unknown arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "coll/reduce.h"
#include "coll/schedule.h"

namespace hmc::coll {
namespace {

const hmc_reduce_op_t kOps[] = {HMC_OP_SUM, HMC_OP_PROD, HMC_OP_MIN, HMC_OP_MAX, HMC_OP_AVG};

template <typename T>
T expected(T a, T b, hmc_reduce_op_t op) {
  switch (op) {
    case HMC_OP_PROD: return T(a * b);
    case HMC_OP_MIN: return std::min(a, b);
    case HMC_OP_MAX: return std::max(a, b);
    default: return T(a + b);
  }
}

// Values small enough that sums and products stay in range for every integer type.
template <typename T>
void check_exact(hmc_dtype_t dtype) {
  const size_t n = 1037;  // not a multiple of any vector width
  for (hmc_reduce_op_t op : kOps) {
    std::vector<T> a(n), b(n), want(n);
    for (size_t i = 0; i < n; ++i) {
      a[i] = T(int(i % 11) - (std::is_signed_v<T> ? 5 : 0));
      b[i] = T(int(i % 7) - (std::is_signed_v<T> ? 3 : 0));
      want[i] = expected(a[i], b[i], op);
    }
    ASSERT_EQ(reduce_into(a.data(), b.data(), n, dtype, op), HMC_SUCCESS);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(a[i], want[i]) << "op " << op << " at " << i;
  }
}

TEST(CollReduce, IntegersAndWideFloatsMatchTheReference) {
  check_exact<int8_t>(HMC_DTYPE_I8);
  check_exact<uint8_t>(HMC_DTYPE_U8);
  check_exact<int32_t>(HMC_DTYPE_I32);
  check_exact<int64_t>(HMC_DTYPE_I64);
  check_exact<float>(HMC_DTYPE_F32);
  check_exact<double>(HMC_DTYPE_F64);
}

// Every bit pattern of the type's range on both sides: bytes exhaustively, wider types on
// patterns that set the sign bit, the top and bottom bytes and alternating bits.
template <typename T>
void check_bitwise(hmc_dtype_t dtype) {
  using U = std::make_unsigned_t<T>;
  std::vector<U> pats;
  if (sizeof(T) == 1) {
    for (unsigned v = 0; v < 256; ++v) pats.push_back(U(v));
  } else {
    const U ones = U(~U(0)), top = U(U(1) << (8 * sizeof(T) - 1));
    for (U p : {U(0), ones, top, U(1), U(ones / 3), U(ones / 5), U(ones ^ top), U(0xff),
                U(U(0xff) << (8 * sizeof(T) - 8)), U(0x1234567890abcdefULL)})
      pats.push_back(p);
  }
  const size_t n = pats.size() * pats.size();
  for (hmc_reduce_op_t op : {HMC_OP_BAND, HMC_OP_BOR, HMC_OP_BXOR}) {
    std::vector<T> a(n), b(n), want(n);
    for (size_t i = 0; i < n; ++i) {
      U x = pats[i / pats.size()], y = pats[i % pats.size()];
      a[i] = T(x);
      b[i] = T(y);
      want[i] = T(op == HMC_OP_BAND ? U(x & y) : op == HMC_OP_BOR ? U(x | y) : U(x ^ y));
    }
    ASSERT_EQ(reduce_into(a.data(), b.data(), n, dtype, op), HMC_SUCCESS);
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(U(a[i]), U(want[i]))
          << reduce_op_name(op) << " " << dtype_name(dtype) << " at " << i;
    EXPECT_TRUE(valid_op_for(dtype, op));
  }
}

TEST(CollReduce, BitwiseOperationsAreExactOnEveryIntegerType) {
  check_bitwise<int8_t>(HMC_DTYPE_I8);
  check_bitwise<uint8_t>(HMC_DTYPE_U8);
  check_bitwise<int32_t>(HMC_DTYPE_I32);
  check_bitwise<int64_t>(HMC_DTYPE_I64);
}

TEST(CollReduce, BitwiseOperationsOnFloatingTypesAreRefusedAndNothingWritten) {
  for (hmc_dtype_t dtype : {HMC_DTYPE_F32, HMC_DTYPE_F64, HMC_DTYPE_F16, HMC_DTYPE_BF16}) {
    for (hmc_reduce_op_t op : {HMC_OP_BAND, HMC_OP_BOR, HMC_OP_BXOR}) {
      uint64_t a[2] = {0x3ff0000000000000ULL, 7}, b[2] = {~0ULL, 9};
      EXPECT_EQ(reduce_into(a, b, 1, dtype, op), HMC_ERR_INVALID_ARGUMENT)
          << reduce_op_name(op) << " " << dtype_name(dtype);
      EXPECT_EQ(a[0], 0x3ff0000000000000ULL);
      EXPECT_EQ(a[1], 7u);
      EXPECT_FALSE(valid_op_for(dtype, op));
    }
    EXPECT_TRUE(valid_op_for(dtype, HMC_OP_SUM));
  }
}

TEST(CollReduce, IntegerOverflowWrapsInsteadOfBeingUndefined) {
  int32_t a = std::numeric_limits<int32_t>::max(), b = 1;
  ASSERT_EQ(reduce_into(&a, &b, 1, HMC_DTYPE_I32, HMC_OP_SUM), HMC_SUCCESS);
  EXPECT_EQ(a, std::numeric_limits<int32_t>::min());
}

TEST(CollReduce, MinAndMaxKeepANaNFromEitherSide) {
  float nan = std::numeric_limits<float>::quiet_NaN();
  for (hmc_reduce_op_t op : {HMC_OP_MIN, HMC_OP_MAX}) {
    float a[2] = {nan, 1.0f}, b[2] = {1.0f, nan};
    ASSERT_EQ(reduce_into(a, b, 2, HMC_DTYPE_F32, op), HMC_SUCCESS);
    EXPECT_TRUE(std::isnan(a[0]));
    EXPECT_TRUE(std::isnan(a[1]));
  }
}

uint16_t bits_of_half_sum(uint16_t x, uint16_t y) {
  uint16_t a = x;
  EXPECT_EQ(reduce_into(&a, &y, 1, HMC_DTYPE_F16, HMC_OP_SUM), HMC_SUCCESS);
  return a;
}

TEST(CollReduce, HalfAddsExactlyRepresentableValues) {
  // 1.0 = 0x3c00, 2.0 = 0x4000, 3.0 = 0x4200; 65504 (max) + 32 rounds to infinity.
  EXPECT_EQ(bits_of_half_sum(0x3c00, 0x4000), 0x4200);
  EXPECT_EQ(bits_of_half_sum(0x7bff, 0x5000), 0x7c00);
  // Smallest subnormals: 2^-24 + 2^-24 = 2^-23.
  EXPECT_EQ(bits_of_half_sum(0x0001, 0x0001), 0x0002);
  // Adding zero leaves every finite value unchanged (each widens and rounds back exactly).
  for (uint32_t h = 0; h < 0x10000; ++h) {
    bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
    if (nan) continue;
    uint16_t zero = (h & 0x8000) ? 0x8000 : 0;  // -0 + -0 stays -0
    ASSERT_EQ(bits_of_half_sum(uint16_t(h), zero), h) << std::hex << h;
  }
}

TEST(CollReduce, HalfRoundsToNearestEven) {
  // 2048 + 1 = 2049 is a tie between 2048 and 2050 (spacing 2): even mantissa wins, 2048.
  // 2048 = 0x6800, 1 = 0x3c00.
  EXPECT_EQ(bits_of_half_sum(0x6800, 0x3c00), 0x6800);
  // 2050 + 1 = 2051: tie between 2050 (odd mantissa) and 2052: rounds to 2052 = 0x6802.
  EXPECT_EQ(bits_of_half_sum(0x6801, 0x3c00), 0x6802);
}

TEST(CollReduce, BFloat16SumsAndRoundsToNearestEven) {
  // bf16 1.0 = 0x3f80, 2.0 = 0x4000, 3.0 = 0x4040.
  uint16_t a = 0x3f80, b = 0x4000;
  ASSERT_EQ(reduce_into(&a, &b, 1, HMC_DTYPE_BF16, HMC_OP_SUM), HMC_SUCCESS);
  EXPECT_EQ(a, 0x4040);
  // 256 + 1 = 257: a tie between 256 (0x4380) and 258 (0x4381); even wins.
  a = 0x4380;
  b = 0x3f80;
  ASSERT_EQ(reduce_into(&a, &b, 1, HMC_DTYPE_BF16, HMC_OP_SUM), HMC_SUCCESS);
  EXPECT_EQ(a, 0x4380);
}

TEST(CollReduce, LongSixteenBitArraysCrossTheConversionBlocks) {
  const size_t n = 2000;
  std::vector<uint16_t> a(n, 0x3c00), b(n, 0x3c00);  // 1.0 each
  ASSERT_EQ(reduce_into(a.data(), b.data(), n, HMC_DTYPE_F16, HMC_OP_SUM), HMC_SUCCESS);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(a[i], 0x4000) << i;
}

TEST(CollReduce, AverageDividesAtTheEnd) {
  int32_t ints[3] = {7, -7, 9};
  ASSERT_EQ(finish_average(ints, 3, HMC_DTYPE_I32, 2), HMC_SUCCESS);
  EXPECT_EQ(ints[0], 3);
  EXPECT_EQ(ints[1], -3);  // toward zero
  EXPECT_EQ(ints[2], 4);
  uint16_t h = 0x4200;  // 3.0 / 2 = 1.5 = 0x3e00
  ASSERT_EQ(finish_average(&h, 1, HMC_DTYPE_F16, 2), HMC_SUCCESS);
  EXPECT_EQ(h, 0x3e00);
  double d = 1.0;
  EXPECT_EQ(finish_average(&d, 1, HMC_DTYPE_F64, 0), HMC_ERR_INVALID_ARGUMENT);
}

TEST(CollReduce, UnknownDatatypeOrOperationIsRefusedAndNothingWritten) {
  int32_t a = 5, b = 6;
  EXPECT_EQ(reduce_into(&a, &b, 1, hmc_dtype_t(42), HMC_OP_SUM), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(reduce_into(&a, &b, 1, HMC_DTYPE_I32, hmc_reduce_op_t(9)), HMC_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(a, 5);
  EXPECT_FALSE(valid_dtype(hmc_dtype_t(-1)));
  EXPECT_FALSE(valid_op(hmc_reduce_op_t(8)));
  EXPECT_STREQ(reduce_op_name(hmc_reduce_op_t(8)), "unknown");
  EXPECT_STREQ(reduce_op_name(HMC_OP_BXOR), "bxor");
  EXPECT_EQ(dtype_size(HMC_DTYPE_BF16), 2u);
  EXPECT_EQ(dtype_size(HMC_DTYPE_I64), 8u);
}

}  // namespace
}  // namespace hmc::coll
