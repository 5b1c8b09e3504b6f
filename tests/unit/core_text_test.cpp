// Text into the C API's fixed-size fields: cut texts say so.
#include <gtest/gtest.h>

#include <string>

#include "util/text.h"

using namespace hmc;

TEST(CopyCut, FitsUnchanged) {
  char dst[8];
  EXPECT_FALSE(copy_cut(dst, sizeof dst, "1234567"));  // 7 bytes + NUL: exactly fits
  EXPECT_STREQ(dst, "1234567");
  EXPECT_FALSE(copy_cut(dst, sizeof dst, ""));
  EXPECT_STREQ(dst, "");
}

TEST(CopyCut, LongerEndsWithTheMark) {
  char dst[8];
  EXPECT_TRUE(copy_cut(dst, sizeof dst, "12345678"));
  EXPECT_STREQ(dst, "1234...");
  std::string reason(300, 'r');
  char field[256];
  EXPECT_TRUE(copy_cut(field, sizeof field, reason));
  EXPECT_EQ(std::string(field), std::string(252, 'r') + "...");
}

TEST(CopyCut, NeverSplitsAUtf8Character) {
  // The cut falls inside é (two bytes), which is left out whole.
  char dst[8];
  EXPECT_TRUE(copy_cut(dst, sizeof dst,
                       "abc\xc3\xa9"
                       "defgh"));
  EXPECT_STREQ(dst, "abc...");
  EXPECT_TRUE(copy_cut(dst, sizeof dst,
                       "abcd\xc3\xa9"
                       "fgh"));
  EXPECT_STREQ(dst, "abcd...");
}
