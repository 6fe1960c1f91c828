// Copyright 2026 The pagedkv Authors.
//
// Corrupt, truncated and inconsistent Hugging Face directories: every one is refused with
// InvalidArgument (NotFound for missing files) naming the file and the tensor or field, and the
// loader never reads outside the file (every truncation and many corrupted headers are tried;
// the ASan build checks the reads).
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "engine/model/formats/safetensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "pagedkv/model/model_source.h"
#include "tests/engine/model/hf_test_model.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::HfTestModel;
using ::pagedkv::testing::HfTestSpec;
using ::pagedkv::testing::MakeHfTestModel;
using ::pagedkv::testing::WriteFile;
using ::testing::AllOf;
using ::testing::HasSubstr;
using json = nlohmann::json;

std::string ReadAll(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string RawSafetensors(const json& header, const std::string& data) {
  const std::string h = header.dump();
  const uint64_t n = h.size();
  return std::string(reinterpret_cast<const char*>(&n), 8) + h + data;
}

class HfBadFilesTest : public ::testing::Test {
 protected:
  HfBadFilesTest() : model_(MakeHfTestModel(HfTestSpec{.layers = 1}, 5)) {}
  std::filesystem::path Dir(const std::string& name) { return model_.Write(name); }
  absl::Status Load(const std::filesystem::path& dir) { return LoadModel(dir.string()).status(); }
  // The directory with model.safetensors replaced by `header` + `data`.
  std::filesystem::path WithFile(const std::string& name, const json& header,
                                 const std::string& data) {
    const auto dir = Dir(name);
    WriteFile(dir / "model.safetensors", RawSafetensors(header, data));
    return dir;
  }
  // The valid file's header and data section.
  std::pair<json, std::string> Parts(const std::filesystem::path& dir) {
    const std::string bytes = ReadAll(dir / "model.safetensors");
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    return {json::parse(bytes.substr(8, n)), bytes.substr(8 + n)};
  }
  HfTestModel model_;
};

void ExpectInvalid(const absl::Status& s, const std::string& a, const std::string& b) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), AllOf(HasSubstr(a), HasSubstr(b)));
}

TEST_F(HfBadFilesTest, ValidDirectoryLoads) { EXPECT_TRUE(Load(Dir("ok")).ok()); }

TEST_F(HfBadFilesTest, OffsetsPastTheEndOfATruncatedFile) {
  const auto dir = Dir("truncated");
  const std::string bytes = ReadAll(dir / "model.safetensors");
  WriteFile(dir / "model.safetensors", bytes.substr(0, bytes.size() - 10));
  // The last tensor in the data (map order) is the first that no longer fits.
  ExpectInvalid(Load(dir), "model.safetensors", "truncated");
  ExpectInvalid(Load(dir), "model.safetensors", "tensor '");
}

TEST_F(HfBadFilesTest, HeaderLengthPastTheEnd) {
  const auto dir = Dir("header_len");
  std::string bytes = ReadAll(dir / "model.safetensors");
  const uint64_t huge = bytes.size();
  std::memcpy(bytes.data(), &huge, 8);
  WriteFile(dir / "model.safetensors", bytes);
  ExpectInvalid(Load(dir), "model.safetensors", "header length");
  WriteFile(dir / "model.safetensors", "abc");
  ExpectInvalid(Load(dir), "model.safetensors", "8-byte");
}

TEST_F(HfBadFilesTest, ShapeThatDisagreesWithConfig) {
  auto [header, data] = Parts(Dir("shape0"));
  header["model.norm.weight"]["shape"] = {16, 2};  // same bytes, other shape
  ExpectInvalid(Load(WithFile("shape", header, data)), "model.norm.weight", "config.json implies");
}

TEST_F(HfBadFilesTest, MissingTensor) {
  auto [header, data] = Parts(Dir("missing0"));
  header.erase("model.layers.0.mlp.up_proj.weight");
  ExpectInvalid(Load(WithFile("missing", header, data)), "model.layers.0.mlp.up_proj.weight",
                "missing tensor");
  auto [h2, d2] = Parts(Dir("missing_head0"));
  h2.erase("lm_head.weight");  // tie_word_embeddings is false: nothing to tie it to
  ExpectInvalid(Load(WithFile("missing_head", h2, d2)), "lm_head.weight", "missing tensor");
}

TEST_F(HfBadFilesTest, UnknownAndUnsupportedDtypes) {
  auto [header, data] = Parts(Dir("dtype0"));
  header["model.norm.weight"]["dtype"] = "F7";
  ExpectInvalid(Load(WithFile("dtype", header, data)), "model.norm.weight", "unknown dtype 'F7'");
  auto [h2, d2] = Parts(Dir("dtype_i32_0"));
  h2["model.norm.weight"]["dtype"] = "I32";  // 4 bytes too, so the header is consistent
  ExpectInvalid(Load(WithFile("dtype_i32", h2, d2)), "model.norm.weight", "only F32, F16 and BF16");
}

TEST_F(HfBadFilesTest, SizeMismatchOverlapAndBadJson) {
  auto [header, data] = Parts(Dir("size0"));
  header["model.norm.weight"]["shape"] = {31};
  ExpectInvalid(Load(WithFile("size", header, data)), "model.norm.weight", "needs");
  auto [h2, d2] = Parts(Dir("overlap0"));
  h2["model.norm.weight"]["data_offsets"] = h2["lm_head.weight"]["data_offsets"];
  h2["model.norm.weight"]["shape"] = h2["lm_head.weight"]["shape"];
  ExpectInvalid(Load(WithFile("overlap", h2, d2)), "model.safetensors", "overlap");
  const auto dir = Dir("badjson");
  WriteFile(dir / "model.safetensors", std::string("\x05\0\0\0\0\0\0\0{abc}", 13));
  ExpectInvalid(Load(dir), "model.safetensors", "JSON");
  auto [h3, d3] = Parts(Dir("extra0"));
  h3["model.layers.0.self_attn.q_norm.weight"] = {
      {"dtype", "F32"}, {"shape", {0}}, {"data_offsets", {d3.size(), d3.size()}}};
  ExpectInvalid(Load(WithFile("extra", h3, d3)), "q_norm", "not part of");
}

TEST_F(HfBadFilesTest, NonFiniteWeight) {
  auto [header, data] = Parts(Dir("nan0"));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(data.data() + header["model.norm.weight"]["data_offsets"][0].get<size_t>(), &nan, 4);
  ExpectInvalid(Load(WithFile("nan", header, data)), "model.norm.weight", "non-finite");
}

TEST_F(HfBadFilesTest, ShardIndexProblems) {
  HfTestSpec spec{.layers = 1};
  spec.shards = 2;
  const HfTestModel sharded = MakeHfTestModel(spec, 6);
  auto dir = sharded.Write("shard_missing_file");
  std::filesystem::remove(dir / "model-00002-of-00002.safetensors");
  EXPECT_EQ(Load(dir).code(), absl::StatusCode::kNotFound);
  dir = sharded.Write("shard_wrong_file");
  json index = json::parse(ReadAll(dir / "model.safetensors.index.json"));
  const bool in_first =
      index["weight_map"]["model.norm.weight"] == "model-00001-of-00002.safetensors";
  index["weight_map"]["model.norm.weight"] =
      in_first ? "model-00002-of-00002.safetensors" : "model-00001-of-00002.safetensors";
  WriteFile(dir / "model.safetensors.index.json", index.dump());
  ExpectInvalid(Load(dir), "model.norm.weight", "does not hold it");
  index["weight_map"]["model.norm.weight"] = "../etc/passwd";
  WriteFile(dir / "model.safetensors.index.json", index.dump());
  ExpectInvalid(Load(dir), "model.norm.weight", "same directory");
}

TEST_F(HfBadFilesTest, UnsupportedConfigFieldsAreNamed) {
  const std::pair<std::string, json> cases[] = {
      {"architecture \"GPT2LMHeadModel\"", {{"architectures", {"GPT2LMHeadModel"}}}},
      {"attention_bias", {{"attention_bias", true}}},
      {"mlp_bias", {{"mlp_bias", true}}},
      {"hidden_act \"gelu\"", {{"hidden_act", "gelu"}}},
      {"partial_rotary_factor", {{"partial_rotary_factor", 0.5}}},
      {"head_dim = 7 must be even", {{"head_dim", 7}}},
      {"\"head_dim\" must be in [1, 2^31)", {{"head_dim", 0}}},
      {"or set explicit_head_dim", {{"num_attention_heads", 3}, {"num_key_value_heads", 3}}},
      {"type \"longrope\"", {{"rope_scaling", {{"type", "longrope"}, {"factor", 2.0}}}}},
      {"key \"finetuned\"",
       {{"rope_scaling", {{"type", "linear"}, {"factor", 2.0}, {"finetuned", true}}}}},
      {"quantization_config", {{"quantization_config", {{"bits", 4}}}}},
      {"num_hidden_layers", {{"num_hidden_layers", -1}}},
      {"n_kv_heads (3) must divide", {{"num_key_value_heads", 3}}},
  };
  int i = 0;
  for (const auto& [want, patch] : cases) {
    const auto dir = Dir("config" + std::to_string(i++));
    json config = model_.ConfigJson();
    config.merge_patch(patch);
    WriteFile(dir / "config.json", config.dump());
    ExpectInvalid(Load(dir), "config.json", want);
  }
  const auto dir = Dir("mistral_window");
  json config = model_.ConfigJson();
  // Windows are read (tests/engine/model/sliding_window_test.cc); a bad one is refused.
  config["architectures"] = {"MistralForCausalLM"};
  config["sliding_window"] = -3;
  WriteFile(dir / "config.json", config.dump());
  ExpectInvalid(Load(dir), "config.json", "\"sliding_window\" must be an integer in [1, 2^31)");
  config["architectures"] = {"LlamaForCausalLM"};
  config["sliding_window"] = nullptr;
  config["use_sliding_window"] = true;  // LlamaConfig has no sliding window
  WriteFile(dir / "config.json", config.dump());
  ExpectInvalid(Load(dir), "config.json", "use_sliding_window");
}

// A config.json head_dim that the stored q_proj does not have: the error names the tensor and
// both shapes (q_proj is [heads * head_dim, hidden] = [64, 32], the file holds [32, 32]).
TEST_F(HfBadFilesTest, HeadDimThatDisagreesWithQProjNamesTheTensor) {
  for (const int head_dim : {16, 4}) {
    const auto dir = Dir("head_dim" + std::to_string(head_dim));
    json config = model_.ConfigJson();
    config["head_dim"] = head_dim;
    WriteFile(dir / "config.json", config.dump());
    const absl::Status s = Load(dir);
    ExpectInvalid(s, "model.safetensors", "model.layers.0.self_attn.q_proj.weight");
    EXPECT_THAT(s.message(), HasSubstr(std::to_string(4 * head_dim))) << s;
  }
  // The reverse: a model made with head_dim 16 whose config.json leaves head_dim out.
  HfTestSpec spec{.layers = 1};
  spec.head_dim = 16;
  const HfTestModel wide = MakeHfTestModel(spec, 5);
  const auto dir = wide.Write("head_dim_missing");
  json config = wide.ConfigJson();
  config.erase("head_dim");
  WriteFile(dir / "config.json", config.dump());
  ExpectInvalid(Load(dir), "model.safetensors", "self_attn.q_proj.weight");
}

// Every truncation of the file, and headers with random bytes changed: an error or a load, never
// a read outside the file (ASan) or a crash.
TEST_F(HfBadFilesTest, TruncationsAndCorruptHeadersNeverReadOutOfBounds) {
  const auto dir = Dir("fuzz_src");
  const std::string bytes = ReadAll(dir / "model.safetensors");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const auto path = (dir / "cut.safetensors").string();
  for (size_t len = 0; len < bytes.size(); len += len < 16 ? 1 : len < 8 + n + 16 ? 7 : 997) {
    WriteFile(path, bytes.substr(0, len));
    absl::StatusOr<model_internal::SafetensorsFile> f = model_internal::SafetensorsFile::Open(path);
    ASSERT_FALSE(f.ok()) << len;
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << len;
  }
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    std::string corrupt = bytes;
    for (int k = 0; k < 3; ++k) corrupt[8 + rng() % n] = static_cast<char>(rng() % 256);
    WriteFile(path, corrupt);
    absl::StatusOr<model_internal::SafetensorsFile> f = model_internal::SafetensorsFile::Open(path);
    if (!f.ok()) {
      EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

}  // namespace
}  // namespace pagedkv
