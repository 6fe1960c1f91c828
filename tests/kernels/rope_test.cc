// Copyright 2026 The pagedkv Authors.
//
// RoPE: config validation and fingerprint, every scaling variant against float64 values computed
// here from the published formulas, the rotation identities, the Rope op, and re-rotation of
// cached keys (p0 -> p1 equals a direct write at p1; repeated shifts drift within the derived
// rounding bound).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "pagedkv/kernels/dtype_convert.h"
#include "pagedkv/kernels/rope_table.h"
#include "pagedkv/rope_config.h"
#include "tests/kernels/kernel_test_util.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::AllScalingConfigs;
using ::pagedkv::testing::RandomFloats;
using ::pagedkv::testing::ReferenceAttentionFactor;
using ::pagedkv::testing::ReferenceInvFreq;
using ::pagedkv::testing::ReferenceRotate;

constexpr double kEps32 = 1.1920928955078125e-07;  // 2^-23

std::string Describe(const RopeConfig& c) { return c.Fingerprint(); }

TEST(RopeConfigTest, ValidConfigsPass) {
  for (const RopeConfig& c : AllScalingConfigs()) EXPECT_TRUE(c.Validate().ok()) << Describe(c);
}

TEST(RopeConfigTest, BadConfigsAreInvalidArgument) {
  std::vector<RopeConfig> bad;
  RopeConfig c;
  c.head_dim = 0;
  bad.push_back(c);
  c.head_dim = 63;  // odd
  bad.push_back(c);
  c.head_dim = 512;  // above kMaxHeadDim
  bad.push_back(c);
  c = RopeConfig{};
  c.rotary_dim = 80;  // > head_dim
  bad.push_back(c);
  c.rotary_dim = 31;  // odd
  bad.push_back(c);
  c = RopeConfig{};
  c.base = 1.0;
  bad.push_back(c);
  c = RopeConfig{};
  c.scaling = RopeScaling::kLlama3;
  c.factor = 8;
  c.original_max_position_embeddings = 0;  // required for llama3
  bad.push_back(c);
  c.original_max_position_embeddings = 8192;
  c.high_freq_factor = c.low_freq_factor;  // division by zero in the smooth band
  bad.push_back(c);
  c = RopeConfig{};
  c.scaling = RopeScaling::kLinear;
  c.factor = 0.5;
  bad.push_back(c);
  c = RopeConfig{};
  c.scaling = RopeScaling::kYarn;
  c.factor = 4;
  c.beta_fast = 1;
  c.beta_slow = 32;
  bad.push_back(c);
  for (const RopeConfig& config : bad) {
    const absl::Status status = config.Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_EQ(RopeTable::Create(config, 16).status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(RopeConfigTest, FingerprintIsStableAndSeparatesConfigs) {
  RopeConfig base;
  // The format is a contract: it goes into persisted cache keys.
  EXPECT_EQ(base.Fingerprint(), "rope/v1/hd=64/rd=64/base=10000/layout=half_split/scaling=none");
  std::vector<std::string> prints;
  for (const RopeConfig& c : AllScalingConfigs()) prints.push_back(c.Fingerprint());
  for (size_t i = 0; i < prints.size(); ++i) {
    for (size_t j = i + 1; j < prints.size(); ++j) EXPECT_NE(prints[i], prints[j]);
  }
  RopeConfig irrelevant = base;
  irrelevant.low_freq_factor = 2.0;  // only used by llama3
  irrelevant.beta_fast = 16.0;       // only used by yarn
  EXPECT_EQ(irrelevant.Fingerprint(), base.Fingerprint());
  RopeConfig explicit_rd = base;
  explicit_rd.rotary_dim = 64;  // same as 0
  EXPECT_EQ(explicit_rd.Fingerprint(), base.Fingerprint());
}

TEST(RopeScalingTest, InverseFrequenciesMatchPublishedFormulas) {
  for (const RopeConfig& c : AllScalingConfigs()) {
    auto table = RopeTable::Create(c, 8);
    ASSERT_TRUE(table.ok()) << table.status();
    const std::vector<double> expected = ReferenceInvFreq(c);
    ASSERT_EQ(table->inv_freq().size(), expected.size()) << Describe(c);
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_NEAR(table->inv_freq()[i], expected[i], 1e-12 * expected[i])
          << Describe(c) << " pair " << i;
    }
    EXPECT_NEAR(table->attention_factor(), ReferenceAttentionFactor(c), 1e-7) << Describe(c);
  }
}

TEST(RopeScalingTest, VariantsChangeTheExpectedBands) {
  RopeConfig none;
  const auto plain = ReferenceInvFreq(none);
  RopeConfig linear = none;
  linear.scaling = RopeScaling::kLinear;
  linear.factor = 4;
  auto t = RopeTable::Create(linear, 1);
  ASSERT_TRUE(t.ok());
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_NEAR(t->inv_freq()[i] * 4, plain[i], 1e-15);
  // YaRN keeps the highest frequency (extrapolation) and divides the lowest by factor.
  RopeConfig yarn = AllScalingConfigs()[7];
  ASSERT_EQ(yarn.scaling, RopeScaling::kYarn);
  auto y = RopeTable::Create(yarn, 1);
  ASSERT_TRUE(y.ok());
  EXPECT_DOUBLE_EQ(y->inv_freq()[0], plain[0]);
  EXPECT_NEAR(y->inv_freq().back() * yarn.factor, plain.back(), 1e-15);
  EXPECT_NEAR(y->attention_factor(), 0.1 * std::log(4.0) + 1.0, 1e-7);
  // Dynamic NTK below the original context is the plain RoPE.
  RopeConfig dynamic = AllScalingConfigs()[6];
  dynamic.dynamic_seq_len = 1000;
  auto d = RopeTable::Create(dynamic, 1);
  ASSERT_TRUE(d.ok());
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_DOUBLE_EQ(d->inv_freq()[i], plain[i]);
}

TEST(RopeTableTest, EntriesMatchFloat64AndBeyondTableIsComputedDirectly) {
  for (const RopeConfig& c : AllScalingConfigs()) {
    auto small = RopeTable::Create(c, 100);
    auto large = RopeTable::Create(c, 300);
    ASSERT_TRUE(small.ok() && large.ok());
    const auto inv = ReferenceInvFreq(c);
    const RopeTableView sv = small->View();
    const RopeTableView lv = large->View();
    for (int64_t pos : {0, 1, 7, 99, 100, 101, 250, 299}) {
      for (int32_t i = 0; i < sv.NumPairs(); ++i) {
        float c1, s1, c2, s2;
        sv.CosSin(pos, i, &c1, &s1);
        lv.CosSin(pos, i, &c2, &s2);
        EXPECT_EQ(c1, c2) << Describe(c) << " pos " << pos;  // same bits in and beyond the table
        EXPECT_EQ(s1, s2);
        EXPECT_NEAR(c1, std::cos(pos * inv[i]), 1e-6);
        EXPECT_NEAR(s1, std::sin(pos * inv[i]), 1e-6);
        float cn, sn;
        sv.CosSin(-pos, i, &cn, &sn);  // negative positions rotate backwards
        EXPECT_EQ(cn, c1);
        EXPECT_EQ(sn, -s1);
      }
    }
  }
}

// Rotates `head` with RopeRotateHead (fp32) and returns a copy.
std::vector<float> Rotated(const RopeTableView& view, int64_t pos, std::vector<float> head) {
  RopeRotateHead(view, pos, head.data());
  return head;
}

double Norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += double(x) * x;
  return std::sqrt(s);
}

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return s;
}

TEST(RopeIdentityTest, ComposeNormAndRelativePosition) {
  for (RopeConfig c : AllScalingConfigs()) {
    c.attention_factor = c.scaling == RopeScaling::kYarn ? 1.0 : 0.0;  // pure rotations here
    auto table = RopeTable::Create(c, 4096);
    ASSERT_TRUE(table.ok());
    const RopeTableView view = table->View();
    const std::vector<float> x = RandomFloats(c.head_dim, 1);
    const std::vector<float> y = RandomFloats(c.head_dim, 2);
    const double tol = 64 * kEps32 * Norm(x);
    for (auto [a, b] :
         std::vector<std::pair<int, int>>{{0, 5}, {3, 17}, {100, 900}, {1500, 2500}}) {
      // R(a) R(b) = R(a + b).
      const auto composed = Rotated(view, a, Rotated(view, b, x));
      const auto direct = Rotated(view, a + b, x);
      for (int d = 0; d < c.head_dim; ++d) {
        EXPECT_NEAR(composed[d], direct[d], tol) << Describe(c) << " a=" << a << " b=" << b;
      }
      // Norm preserved.
      EXPECT_NEAR(Norm(direct), Norm(x), 16 * kEps32 * Norm(x));
      // <R(m) x, R(n) y> depends only on m - n.
      const double ref = Dot(Rotated(view, a, x), Rotated(view, b, y));
      for (int shift : {1, 37, 1000}) {
        const double shifted = Dot(Rotated(view, a + shift, x), Rotated(view, b + shift, y));
        EXPECT_NEAR(shifted, ref, 64 * kEps32 * Norm(x) * Norm(y)) << Describe(c);
      }
    }
  }
}

TEST(RopeIdentityTest, RelativePositionDistinguishesDistances) {
  RopeConfig c;
  auto table = RopeTable::Create(c, 64);
  ASSERT_TRUE(table.ok());
  const auto x = RandomFloats(c.head_dim, 3);
  const auto y = RandomFloats(c.head_dim, 4);
  const double d1 = Dot(Rotated(table->View(), 10, x), Rotated(table->View(), 5, y));
  const double d2 = Dot(Rotated(table->View(), 10, x), Rotated(table->View(), 6, y));
  EXPECT_GT(std::abs(d1 - d2), 1e-3);  // the test above would pass trivially otherwise
}

TEST(RopeOpTest, MatchesFloat64ReferenceForEveryVariant) {
  const int64_t num_tokens = 5;
  const int32_t nq = 4;
  const int32_t nkv = 2;
  const std::vector<int32_t> positions = {0, 1, 63, 64, 5000};  // last is beyond the table
  for (const RopeConfig& c : AllScalingConfigs()) {
    auto table = RopeTable::Create(c, 64);
    ASSERT_TRUE(table.ok());
    const int32_t hd = c.head_dim;
    std::vector<float> q = RandomFloats(num_tokens * nq * hd, 5);
    std::vector<float> k = RandomFloats(num_tokens * nkv * hd, 6);
    const std::vector<float> q0 = q;
    const std::vector<float> k0 = k;
    RopeArgs args{.q = q.data(),
                  .k = k.data(),
                  .positions = positions.data(),
                  .num_tokens = num_tokens,
                  .num_q_heads = nq,
                  .num_kv_heads = nkv,
                  .rope = table->View()};
    ASSERT_TRUE(cpu::Rope(args).ok());
    const auto inv = ReferenceInvFreq(c);
    const double af = ReferenceAttentionFactor(c);
    auto check = [&](const std::vector<float>& in, const std::vector<float>& out, int heads) {
      for (int64_t t = 0; t < num_tokens; ++t) {
        for (int h = 0; h < heads; ++h) {
          const float* head = &in[(t * heads + h) * hd];
          std::vector<double> hd64(head, head + hd);
          const auto expected = ReferenceRotate(c, inv, af, positions[t], hd64.data());
          for (int d = 0; d < hd; ++d) {
            // fp32 table entries are within 2^-24 of cos/sin, plus fp32 products.
            EXPECT_NEAR(out[(t * heads + h) * hd + d], expected[d], 8 * kEps32 * af)
                << Describe(c) << " t=" << t << " d=" << d;
          }
        }
      }
    };
    check(q0, q, nq);
    check(k0, k, nkv);
  }
}

// One-layer cache of `dtype` with `num_slots` single-token blocks, head_dim from `c`.
struct TestCache {
  TestCache(const RopeConfig& c, DType dtype, int32_t num_blocks, int32_t nkv)
      : k(num_blocks * nkv * c.head_dim * 4), v(k.size()) {
    layout.k = k.data();
    layout.v = v.data();
    layout.dtype = dtype;
    layout.num_blocks = num_blocks;
    layout.block_size = 1;
    layout.num_kv_heads = nkv;
    layout.head_dim = c.head_dim;
  }
  std::vector<float> ReadK(int64_t slot) const {
    std::vector<float> out(layout.TokenStride());
    for (int64_t i = 0; i < layout.TokenStride(); ++i) {
      out[i] = LoadElement(layout.k, layout.dtype, slot * layout.TokenStride() + i);
    }
    return out;
  }
  std::vector<float> ReadV(int64_t slot) const {
    std::vector<float> out(layout.TokenStride());
    for (int64_t i = 0; i < layout.TokenStride(); ++i) {
      out[i] = LoadElement(layout.v, layout.dtype, slot * layout.TokenStride() + i);
    }
    return out;
  }
  std::vector<float> k;  // over-allocated as fp32 so every dtype fits
  std::vector<float> v;
  PagedKvLayout layout;
};

absl::Status Write(TestCache& cache, const RopeTable& table, const std::vector<float>& k,
                   const std::vector<float>& v, int32_t position, int64_t slot) {
  ReshapeAndCacheArgs w{.k = k.data(),
                        .v = v.data(),
                        .positions = &position,
                        .slot_mapping = &slot,
                        .num_tokens = 1,
                        .rope = table.View(),
                        .cache = cache.layout};
  return cpu::ReshapeAndCache(w);
}

absl::Status Shift(TestCache& cache, const RopeTable& table, int64_t src, int64_t dst, int32_t p0,
                   int32_t p1, ReRotateMode mode) {
  ReRotateArgs r{.src_slots = &src,
                 .dst_slots = &dst,
                 .old_positions = &p0,
                 .new_positions = &p1,
                 .num_tokens = 1,
                 .mode = mode,
                 .rope = table.View(),
                 .cache = cache.layout};
  return cpu::ReRotate(r);
}

// Unit roundoff of the storage dtype.
double UnitRoundoff(DType dtype) {
  switch (dtype) {
    case DType::kF16:
      return std::ldexp(1.0, -11);
    case DType::kBF16:
      return std::ldexp(1.0, -8);
    case DType::kF32:
      return std::ldexp(1.0, -24);
    default:  // quantized rows: tests/kernels/kv_quant_test.cc
      return 1.0;
  }
}

// Per-pair error bound of one re-rotation vs a direct write: the rounding already in the stored
// key (each of the two components off by <= u|x|, so <= u * |pair| as a vector) is turned but not
// grown; the new store adds <= u * |pair| again; fp32 arithmetic on table entries adds a few eps.
double PairBound(DType dtype, double pair_norm, int steps) {
  return (steps * (2 * UnitRoundoff(dtype) + 16 * kEps32) + UnitRoundoff(dtype)) * pair_norm +
         1e-30;
}

void ExpectPairsClose(const RopeConfig& c, const std::vector<float>& got,
                      const std::vector<float>& want, DType dtype, int steps,
                      const std::string& what) {
  const int32_t rd = c.RotaryDim();
  const int32_t hd = c.head_dim;
  for (size_t h = 0; h < got.size() / hd; ++h) {
    for (int i = 0; i < rd / 2; ++i) {
      const int a = c.layout == RopeLayout::kInterleaved ? 2 * i : i;
      const int b = c.layout == RopeLayout::kInterleaved ? 2 * i + 1 : i + rd / 2;
      const double ga = got[h * hd + a], gb = got[h * hd + b];
      const double wa = want[h * hd + a], wb = want[h * hd + b];
      const double err = std::hypot(ga - wa, gb - wb);
      EXPECT_LE(err, PairBound(dtype, std::hypot(wa, wb), steps))
          << what << " " << Describe(c) << " dtype " << DTypeName(dtype) << " head " << h
          << " pair " << i;
    }
    for (int d = rd; d < hd; ++d) EXPECT_EQ(got[h * hd + d], want[h * hd + d]) << what;
  }
}

TEST(ReRotateTest, ShiftEqualsDirectWriteForEveryVariantAndDtype) {
  const int32_t nkv = 2;
  for (const RopeConfig& c : AllScalingConfigs()) {
    auto table = RopeTable::Create(c, 2048);
    ASSERT_TRUE(table.ok());
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (ReRotateMode mode : {ReRotateMode::kCompose, ReRotateMode::kDelta}) {
        TestCache cache(c, dtype, 8, nkv);
        const auto k = RandomFloats(nkv * c.head_dim, 7);
        const auto v = RandomFloats(nkv * c.head_dim, 8);
        for (auto [p0, p1] : std::vector<std::pair<int, int>>{{3, 10}, {1000, 17}, {5, 3000}}) {
          ASSERT_TRUE(Write(cache, *table, k, v, p0, 0).ok());
          ASSERT_TRUE(Write(cache, *table, k, v, p1, 1).ok());         // direct at p1
          ASSERT_TRUE(Shift(cache, *table, 0, 2, p0, p1, mode).ok());  // out of place
          ExpectPairsClose(c, cache.ReadK(2), cache.ReadK(1), dtype, 1, "out of place");
          EXPECT_EQ(cache.ReadV(2), cache.ReadV(0));
          ASSERT_TRUE(Shift(cache, *table, 0, 0, p0, p1, mode).ok());  // in place
          EXPECT_EQ(cache.ReadK(0), cache.ReadK(2));                   // same arithmetic either way
        }
      }
    }
  }
}

TEST(ReRotateTest, YarnMagnitudeIsAppliedOnce) {
  RopeConfig c = AllScalingConfigs()[7];
  ASSERT_EQ(c.scaling, RopeScaling::kYarn);
  auto table = RopeTable::Create(c, 256);
  ASSERT_TRUE(table.ok());
  ASSERT_GT(table->attention_factor(), 1.1f);
  TestCache cache(c, DType::kF32, 4, 1);
  const auto k = RandomFloats(c.head_dim, 9);
  const auto v = RandomFloats(c.head_dim, 10);
  ASSERT_TRUE(Write(cache, *table, k, v, 7, 0).ok());
  for (int step = 0; step < 5; ++step) {
    ASSERT_TRUE(Shift(cache, *table, 0, 0, 7 + step, 8 + step, ReRotateMode::kCompose).ok());
  }
  EXPECT_NEAR(Norm(cache.ReadK(0)), Norm(k) * table->attention_factor(), 1e-4 * Norm(k));
}

TEST(ReRotateTest, RepeatedShiftsDriftWithinRoundingBound) {
  for (const RopeConfig& c : AllScalingConfigs()) {
    auto table = RopeTable::Create(c, 4096);
    ASSERT_TRUE(table.ok());
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      TestCache cache(c, dtype, 2, 1);
      const auto k = RandomFloats(c.head_dim, 11);
      const auto v = RandomFloats(c.head_dim, 12);
      const std::vector<int> path = {0, 13, 500, 7, 2047, 3000, 64, 4095};
      ASSERT_TRUE(Write(cache, *table, k, v, path[0], 0).ok());
      for (size_t step = 1; step < path.size(); ++step) {
        ASSERT_TRUE(
            Shift(cache, *table, 0, 0, path[step - 1], path[step], ReRotateMode::kCompose).ok());
        ASSERT_TRUE(Write(cache, *table, k, v, path[step], 1).ok());
        ExpectPairsClose(c, cache.ReadK(0), cache.ReadK(1), dtype, static_cast<int>(step),
                         "after " + std::to_string(step) + " shifts");
      }
    }
  }
}

TEST(ReRotateTest, BadInputIsInvalidArgumentAndLeavesCacheUnchanged) {
  RopeConfig c;
  auto table = RopeTable::Create(c, 16);
  ASSERT_TRUE(table.ok());
  TestCache cache(c, DType::kF16, 4, 1);
  const auto k = RandomFloats(c.head_dim, 13);
  ASSERT_TRUE(Write(cache, *table, k, k, 3, 1).ok());
  const std::vector<float> before = cache.k;
  EXPECT_EQ(Shift(cache, *table, 1, 4, 3, 5, ReRotateMode::kCompose).code(),
            absl::StatusCode::kInvalidArgument);  // dst out of range
  EXPECT_EQ(Shift(cache, *table, -1, 1, 3, 5, ReRotateMode::kCompose).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Shift(cache, *table, 1, 1, -3, 5, ReRotateMode::kCompose).code(),
            absl::StatusCode::kInvalidArgument);
  TestCache other(RopeConfig{.head_dim = 32}, DType::kF16, 4, 1);
  EXPECT_EQ(Shift(other, *table, 1, 1, 3, 5, ReRotateMode::kCompose).code(),
            absl::StatusCode::kInvalidArgument);  // head_dim mismatch
  cache.layout.dtype = static_cast<DType>(99);
  EXPECT_EQ(Shift(cache, *table, 1, 1, 3, 5, ReRotateMode::kCompose).code(),
            absl::StatusCode::kInvalidArgument);  // unsupported dtype
  EXPECT_EQ(cache.k, before);
}

}  // namespace
}  // namespace pagedkv
