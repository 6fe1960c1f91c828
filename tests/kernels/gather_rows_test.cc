// Copyright 2026 The pagedkv Authors.
//
// cpu::GatherRows against a brute-force reference that decodes fp16 / bf16 bits from their
// definitions (not through pagedkv's conversions), on random tables, strides and row lists, and
// its argument checks: every bad input is InvalidArgument and leaves the output untouched.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "pagedkv/dtype.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "pagedkv/kernels/op_args.h"

namespace pagedkv {
namespace {

// IEEE binary16: sign, 5 exponent bits (bias 15), 10 fraction bits; subnormals below 2^-14.
double HalfBitsValue(uint16_t h) {
  const int sign = (h >> 15) != 0 ? -1 : 1;
  const int exponent = (h >> 10) & 0x1f;
  const int fraction = h & 0x3ff;
  if (exponent == 0) return sign * std::ldexp(fraction, -24);
  return sign * std::ldexp(1024 + fraction, exponent - 25);
}

// bfloat16: the upper 16 bits of an IEEE binary32.
double BFloat16BitsValue(uint16_t b) {
  const uint32_t bits = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// A table of `elements` finite values of `dtype`, as raw bytes.
std::vector<char> RandomTable(DType dtype, int64_t elements, std::mt19937& rng) {
  std::vector<char> bytes(static_cast<size_t>(elements * DTypeSize(dtype)));
  for (int64_t e = 0; e < elements; ++e) {
    if (dtype == DType::kF32) {
      const float f = std::uniform_real_distribution<float>(-4.0f, 4.0f)(rng);
      std::memcpy(bytes.data() + e * 4, &f, 4);
      continue;
    }
    // Exponent below all-ones: finite halves; bf16 with a mid-range exponent.
    uint16_t bits = static_cast<uint16_t>(rng());
    if (dtype == DType::kF16 && ((bits >> 10) & 0x1f) == 0x1f) bits &= 0xbfff;
    if (dtype == DType::kBF16) bits = static_cast<uint16_t>((bits & 0x807f) | 0x3f00);
    std::memcpy(bytes.data() + e * 2, &bits, 2);
  }
  return bytes;
}

double ReferenceElement(const std::vector<char>& table, DType dtype, int64_t index) {
  if (dtype == DType::kF32) {
    float f;
    std::memcpy(&f, table.data() + index * 4, 4);
    return f;
  }
  uint16_t bits;
  std::memcpy(&bits, table.data() + index * 2, 2);
  return dtype == DType::kF16 ? HalfBitsValue(bits) : BFloat16BitsValue(bits);
}

TEST(GatherRowsTest, MatchesBruteForceOnRandomTables) {
  std::mt19937 rng(20261201);
  for (int trial = 0; trial < 200; ++trial) {
    const DType dtype = std::vector<DType>{DType::kF32, DType::kF16, DType::kBF16}[trial % 3];
    const int64_t num_src_rows = std::uniform_int_distribution<int64_t>(1, 40)(rng);
    const int64_t width = std::uniform_int_distribution<int64_t>(1, 70)(rng);
    const int64_t stride = trial % 2 == 0 ? 0 : width + (trial % 5);
    const int64_t row_elems = stride == 0 ? width : stride;
    const std::vector<char> table = RandomTable(dtype, num_src_rows * row_elems, rng);
    const int64_t num_rows = std::uniform_int_distribution<int64_t>(0, 60)(rng);
    std::vector<int64_t> rows(static_cast<size_t>(num_rows) + 1);  // + 1: non-null when empty
    for (int64_t& r : rows) r = std::uniform_int_distribution<int64_t>(0, num_src_rows - 1)(rng);
    std::vector<float> out(static_cast<size_t>(num_rows * width) + 1, -7.0f);
    const GatherRowsArgs args{.src = table.data(),
                              .rows = rows.data(),
                              .out = out.data(),
                              .num_rows = num_rows,
                              .num_src_rows = num_src_rows,
                              .width = width,
                              .src_stride = stride,
                              .src_dtype = dtype};
    ASSERT_TRUE(cpu::GatherRows(args).ok()) << "trial " << trial;
    for (int64_t i = 0; i < num_rows; ++i) {
      for (int64_t e = 0; e < width; ++e) {
        const double want =
            ReferenceElement(table, dtype, rows[static_cast<size_t>(i)] * row_elems + e);
        ASSERT_EQ(out[static_cast<size_t>(i * width + e)], want)
            << "trial " << trial << " row " << i << " element " << e;
      }
    }
    EXPECT_EQ(out.back(), -7.0f) << "wrote past the output, trial " << trial;
  }
}

TEST(GatherRowsTest, BadArgumentsAreInvalidArgumentAndWriteNothing) {
  const std::vector<float> table(12, 1.5f);  // 4 rows of 3
  const std::vector<int64_t> rows = {0, 3, 1};
  std::vector<float> out(9, -7.0f);
  const GatherRowsArgs good{.src = table.data(),
                            .rows = rows.data(),
                            .out = out.data(),
                            .num_rows = 3,
                            .num_src_rows = 4,
                            .width = 3};
  std::vector<GatherRowsArgs> bad(12, good);
  bad[0].src = nullptr;
  bad[1].rows = nullptr;
  bad[2].out = nullptr;
  bad[3].num_rows = -1;
  bad[4].num_src_rows = 0;
  bad[5].width = 0;
  bad[6].src_stride = 2;  // below width
  bad[7].src_dtype = static_cast<DType>(99);
  const std::vector<int64_t> negative = {0, -1, 1}, past = {0, 4, 1}, last_bad = {0, 1, 7};
  bad[8].rows = negative.data();
  bad[9].rows = past.data();
  bad[10].rows = last_bad.data();
  bad[11].num_src_rows = 3;  // row 3 is then outside
  for (size_t i = 0; i < bad.size(); ++i) {
    EXPECT_EQ(cpu::GatherRows(bad[i]).code(), absl::StatusCode::kInvalidArgument) << "case " << i;
    EXPECT_EQ(out, std::vector<float>(9, -7.0f)) << "case " << i;
  }
  EXPECT_NE(cpu::GatherRows(bad[9]).message().find("rows[1] = 4"), std::string::npos);
  ASSERT_TRUE(cpu::GatherRows(good).ok());
  EXPECT_EQ(out, std::vector<float>(9, 1.5f));
}

TEST(GatherRowsTest, NoRowsWritesNothing) {
  const std::vector<float> table(6, 2.0f);
  const int64_t row = 0;
  float out = -7.0f;
  ASSERT_TRUE(cpu::GatherRows({.src = table.data(),
                               .rows = &row,
                               .out = &out,
                               .num_rows = 0,
                               .num_src_rows = 2,
                               .width = 3})
                  .ok());
  EXPECT_EQ(out, -7.0f);
}

}  // namespace
}  // namespace pagedkv
