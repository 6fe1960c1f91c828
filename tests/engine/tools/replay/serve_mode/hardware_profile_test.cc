// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/serve_mode/hardware_profile.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "engine/tools/replay/serve_mode/cost_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagedkv::replay {
namespace {

using ::testing::HasSubstr;

constexpr const char* kProfile = R"({
  "name": "cpu-test", "model": "smollm2-135m",
  "peak_flops": 2e10, "attention_flops": 5e9, "memory_bandwidth": 1e10, "memory_bytes": 1e12,
  "step_overhead_s": 0.003, "per_sequence_s": 0.0005, "additive": true,
  "kv_bytes_per_element": 4, "weight_bytes_per_parameter": 0.72,
  "measured": {"anything": [1, 2, 3]}
})";

TEST(HardwareProfileTest, ParsesEveryField) {
  auto p = ParseHardwareProfile(kProfile);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->device.name, "cpu-test");
  EXPECT_EQ(p->model, "smollm2-135m");
  EXPECT_EQ(p->device.peak_flops, 2e10);
  EXPECT_EQ(p->device.memory_bandwidth, 1e10);
  EXPECT_EQ(p->device.attention_flops, 5e9);
  EXPECT_EQ(p->cost.step_overhead_s, 0.003);
  EXPECT_TRUE(p->cost.additive);
  EXPECT_EQ(p->cost.per_sequence_s, 0.0005);
  EXPECT_EQ(p->cost.compute_efficiency, 1.0);
  EXPECT_EQ(p->cost.memory_efficiency, 1.0);
  auto smol = FindModelPreset("smollm2-135m");
  ASSERT_TRUE(smol.ok());
  const ModelPreset applied = p->Apply(*smol);
  EXPECT_EQ(applied.KvBytesPerToken(), 2 * 30 * 3 * 64 * 4);
  EXPECT_DOUBLE_EQ(applied.WeightBytes(), 134.5e6 * 0.72);
  EXPECT_DOUBLE_EQ(smol->WeightBytes(), 134.5e6 * 2);  // the preset itself: BF16
}

TEST(HardwareProfileTest, AdditiveStepIsComputePlusMemoryPlusOverhead) {
  auto p = ParseHardwareProfile(kProfile);
  ASSERT_TRUE(p.ok());
  const ModelPreset model = p->Apply(*FindModelPreset("smollm2-135m"));
  RooflineCostModel cost(p->device, model, p->cost);
  StepWork work;
  work.AddSequence(/*num_computed_tokens=*/0, /*num_new_tokens=*/256);
  work.AddSequence(/*num_computed_tokens=*/40, /*num_new_tokens=*/1);
  EXPECT_EQ(work.num_sequences, 2);
  const double expected = 0.003 + (cost.StepFlops(work) - cost.StepAttentionFlops(work)) / 2e10 +
                          cost.StepAttentionFlops(work) / 5e9 + cost.StepBytes(work) / 1e10 +
                          2 * 0.0005;
  EXPECT_DOUBLE_EQ(cost.StepSeconds(work), expected);
  CostModelOptions roofline = p->cost;
  roofline.additive = false;
  RooflineCostModel max_model(p->device, model, roofline);
  EXPECT_LT(max_model.StepSeconds(work), cost.StepSeconds(work));
}

TEST(HardwareProfileTest, BadProfilesNameTheField) {
  const auto message = [](const std::string& text) {
    auto p = ParseHardwareProfile(text);
    return p.ok() ? std::string("ok") : std::string(p.status().message());
  };
  EXPECT_THAT(message("[1]"), HasSubstr("not a JSON object"));
  EXPECT_THAT(message("{\"memory_bandwidth\": 1, \"memory_bytes\": 1}"),
              HasSubstr("\"peak_flops\" is missing"));
  EXPECT_THAT(message("{\"peak_flops\": -1, \"memory_bandwidth\": 1, \"memory_bytes\": 1}"),
              HasSubstr("\"peak_flops\" must be > 0"));
  EXPECT_THAT(message("{\"peak_flops\": \"fast\", \"memory_bandwidth\": 1, \"memory_bytes\": 1}"),
              HasSubstr("must be a number"));
  EXPECT_THAT(message("{\"peak_flops\": 1, \"memory_bandwidth\": 1, \"memory_bytes\": 1, "
                      "\"kv_bytes_per_element\": 2.5}"),
              HasSubstr("whole number"));
  EXPECT_THAT(message("{\"peak_flops\": 1, \"memory_bandwidth\": 1, \"memory_bytes\": 1, "
                      "\"additive\": 1}"),
              HasSubstr("true or false"));
  EXPECT_EQ(message("{\"peak_flops\": 1, \"memory_bandwidth\": 1, \"memory_bytes\": 1}"), "ok");
}

TEST(HardwareProfileTest, ReadsAFileAndNamesItInErrors) {
  EXPECT_EQ(ReadHardwareProfile("/nonexistent/profile.json").status().code(),
            absl::StatusCode::kNotFound);
  const std::string path = ::testing::TempDir() + "/hardware_profile_test.json";
  { std::ofstream(path) << "{\"peak_flops\": 0, \"memory_bandwidth\": 1, \"memory_bytes\": 1}"; }
  auto bad = ReadHardwareProfile(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr(path));
  { std::ofstream(path) << kProfile; }
  EXPECT_TRUE(ReadHardwareProfile(path).ok());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace pagedkv::replay
