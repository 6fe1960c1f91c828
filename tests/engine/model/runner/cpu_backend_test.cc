// Copyright 2026 The pagedkv Authors.
//
// The CPU backend's Linear and LM head: weights in memory declared constant run the packed kernel
// (bit for bit cpu::PackedLinear), other weights the plain one (bit for bit cpu::Linear); both
// agree within float rounding; bad input is rejected with the output untouched either way.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/runner/backend.h"
#include "gtest/gtest.h"
#include "kernels/cpu/packed_linear.h"
#include "kernels/cpu/threaded_ops.h"
#include "tests/kernels/kernel_test_util.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::RandomFloats;

constexpr int64_t kM = 5, kN = 70, kK = 33;

struct Operands {
  std::vector<float> x = RandomFloats(kM * kK, 1);
  std::vector<float> w = RandomFloats(kN * kK, 2);
  std::vector<float> y = std::vector<float>(kM * kN, 0.0f);
  LinearArgs args() {
    return {.x = x.data(), .w = w.data(), .y = y.data(), .m = kM, .n = kN, .k = kK};
  }
};

TEST(CpuBackendTest, DeclaredWeightsRunThePackedKernelOthersThePlainOne) {
  for (int32_t threads : {1, 2}) {
    auto backend = CreateCpuBackend({.num_threads = threads});
    ASSERT_TRUE(backend.ok()) << backend.status();
    Operands o;
    ASSERT_TRUE((*backend)->Linear(o.args()).ok());
    std::vector<float> plain(o.y.size());
    ASSERT_TRUE(
        cpu::Linear(
            {.x = o.x.data(), .w = o.w.data(), .y = plain.data(), .m = kM, .n = kN, .k = kK},
            nullptr)
            .ok());
    EXPECT_EQ(std::memcmp(o.y.data(), plain.data(), plain.size() * sizeof(float)), 0);

    ASSERT_TRUE((*backend)->DeclareConstant(o.w.data(), o.w.size() * sizeof(float)).ok());
    ASSERT_TRUE((*backend)->Linear(o.args()).ok());
    auto packed = cpu::PackedWeights::Pack(o.w.data(), kN, kK);
    ASSERT_TRUE(packed.ok());
    std::vector<float> want(o.y.size());
    ASSERT_TRUE(cpu::PackedLinear(
                    {.x = o.x.data(), .w = o.w.data(), .y = want.data(), .m = kM, .n = kN, .k = kK},
                    *packed, nullptr)
                    .ok());
    EXPECT_EQ(std::memcmp(o.y.data(), want.data(), want.size() * sizeof(float)), 0);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(want[i], plain[i], 1e-5f) << i;

    std::vector<float> logits(o.y.size());
    ASSERT_TRUE((*backend)
                    ->LmHead({.hidden = o.x.data(),
                              .weight = o.w.data(),
                              .logits = logits.data(),
                              .num_rows = kM,
                              .d_model = kK,
                              .vocab_size = kN})
                    .ok());
    EXPECT_EQ(std::memcmp(logits.data(), want.data(), want.size() * sizeof(float)), 0);
  }
}

TEST(CpuBackendTest, RejectsBadInputWithOutputUntouched) {
  std::unique_ptr<Backend> backend = CreateCpuBackend();
  Operands o;
  for (bool declared : {false, true}) {
    if (declared) {
      ASSERT_TRUE(backend->DeclareConstant(o.w.data(), o.w.size() * sizeof(float)).ok());
    }
    std::fill(o.y.begin(), o.y.end(), 7.0f);
    LinearArgs bad = o.args();
    bad.x = nullptr;
    EXPECT_TRUE(absl::IsInvalidArgument(backend->Linear(bad)));
    bad = o.args();
    bad.y = const_cast<float*>(bad.w);
    EXPECT_TRUE(absl::IsInvalidArgument(backend->Linear(bad)));
    EXPECT_TRUE(absl::IsInvalidArgument(backend->LmHead({.hidden = o.x.data(),
                                                         .weight = o.w.data(),
                                                         .logits = o.y.data(),
                                                         .num_rows = kM,
                                                         .d_model = 0,
                                                         .vocab_size = kN})));
    for (float v : o.y) ASSERT_EQ(v, 7.0f);
  }
  EXPECT_TRUE(absl::IsInvalidArgument(backend->DeclareConstant(nullptr, 16)));
}

}  // namespace
}  // namespace pagedkv
