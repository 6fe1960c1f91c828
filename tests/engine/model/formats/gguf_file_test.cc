// Copyright 2026 The pagedkv Authors.
//
// GgufFile: every metadata value type (arrays, nested arrays), both versions, alignment, tensor
// placement, and malformed files refused with InvalidArgument naming the key or tensor.
#include "engine/model/formats/gguf_file.h"

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/model/gguf_test_writer.h"
#include "tests/test_temp_dir.h"

namespace pagedkv::model_internal {
namespace {

using ::pagedkv::testing::GgufWriter;
using ::pagedkv::testing::kGgufF32;
using ::pagedkv::testing::kGgufQ8_0;
using ::pagedkv::testing::PutRaw;
using ::pagedkv::testing::PutStr;
using ::pagedkv::testing::WriteGgufFile;
using ::testing::HasSubstr;

std::string Write(const std::string& name, const std::string& bytes) {
  const auto p = ::pagedkv::testing::TestTempDir() / ("gguf_file_" + name + ".gguf");
  WriteGgufFile(p, bytes);
  return p.string();
}

std::string OpenError(const std::string& name, const std::string& bytes) {
  absl::StatusOr<GgufFile> f = GgufFile::Open(Write(name, bytes));
  EXPECT_FALSE(f.ok()) << name;
  if (f.ok()) return "";
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << f.status();
  return std::string(f.status().message());
}

template <typename T>
std::string Raw(T v) {
  std::string s;
  PutRaw<T>(&s, v);
  return s;
}

TEST(GgufFileTest, ReadsEveryValueType) {
  GgufWriter w;
  w.Raw("u8", 0, Raw<uint8_t>(200));
  w.Raw("i8", 1, Raw<int8_t>(-100));
  w.Raw("u16", 2, Raw<uint16_t>(60000));
  w.Raw("i16", 3, Raw<int16_t>(-30000));
  w.U32("u32", 4000000000u);
  w.I32("i32", -2000000000);
  w.F32("f32", 0.5f);
  w.Bool("bool", true);
  w.Str("str", "héllo");
  w.Raw("u64", 10, Raw<uint64_t>(uint64_t{1} << 40));
  w.Raw("i64", 11, Raw<int64_t>(-(int64_t{1} << 40)));
  w.Raw("f64", 12, Raw<double>(-0.125));
  w.StrArray("strs", {"a", "", "ccc"});
  w.NumArray<int32_t>("ints", 5, {1, -2, 3});
  std::string nested;  // [[1, 2], []] of UINT16
  PutRaw<uint32_t>(&nested, 9);
  PutRaw<uint64_t>(&nested, 2);
  for (int n : {2, 0}) {
    PutRaw<uint32_t>(&nested, 2);
    PutRaw<uint64_t>(&nested, static_cast<uint64_t>(n));
    for (int i = 0; i < n; ++i) PutRaw<uint16_t>(&nested, static_cast<uint16_t>(i + 1));
  }
  w.Raw("nested", 9, nested);
  absl::StatusOr<GgufFile> f = GgufFile::Open(Write("types", w.Bytes()));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(*f->GetInt("u8"), 200);
  EXPECT_EQ(*f->GetInt("i8"), -100);
  EXPECT_EQ(*f->GetInt("u16"), 60000);
  EXPECT_EQ(*f->GetInt("i16"), -30000);
  EXPECT_EQ(*f->GetInt("u32"), 4000000000);
  EXPECT_EQ(*f->GetInt("i32"), -2000000000);
  EXPECT_EQ(*f->GetFloat("f32"), 0.5);
  EXPECT_EQ(*f->GetFloat("u32"), 4e9);
  EXPECT_TRUE(*f->GetBool("bool"));
  EXPECT_EQ(*f->GetString("str"), "héllo");
  EXPECT_EQ(*f->GetInt("u64"), int64_t{1} << 40);
  EXPECT_EQ(*f->GetInt("i64"), -(int64_t{1} << 40));
  EXPECT_EQ(*f->GetFloat("f64"), -0.125);
  absl::StatusOr<const std::vector<GgufValue>*> strs = f->GetArray("strs", GgufValueType::kString);
  ASSERT_TRUE(strs.ok());
  ASSERT_EQ((*strs)->size(), 3u);
  EXPECT_EQ((**strs)[2].s, "ccc");
  EXPECT_EQ((**f->GetArray("ints", GgufValueType::kInt32))[1].i, -2);
  const std::vector<GgufValue>& outer = **f->GetArray("nested", GgufValueType::kArray);
  ASSERT_EQ(outer.size(), 2u);
  EXPECT_EQ(outer[0].elements[1].u, 2u);
  EXPECT_TRUE(outer[1].elements.empty());
  EXPECT_EQ(f->keys().front(), "u8");
  EXPECT_THAT(f->GetInt("str").status().message(), HasSubstr("key 'str' must be an integer"));
  EXPECT_THAT(f->GetString("missing").status().message(), HasSubstr("key 'missing' is missing"));
  EXPECT_THAT(f->GetArray("ints", GgufValueType::kString).status().message(),
              HasSubstr("ARRAY of STRING"));
}

TEST(GgufFileTest, PlacesTensorsAtTheAlignmentAndReadsThem) {
  for (uint32_t version : {2u, 3u}) {
    for (uint32_t alignment : {32u, 64u}) {
      GgufWriter w;
      if (alignment != 32) w.U32("general.alignment", alignment);
      std::string a;
      for (int i = 0; i < 6; ++i) PutRaw<float>(&a, static_cast<float>(i) - 2.5f);
      w.Tensor("a", {3, 2}, kGgufF32, a);
      std::string q;  // one Q8_0 block: d = 1, q = 0..31
      ::pagedkv::testing::PutF16(&q, 0x3C00);
      for (int i = 0; i < 32; ++i) q.push_back(static_cast<char>(i));
      w.Tensor("q", {32}, kGgufQ8_0, q);
      absl::StatusOr<GgufFile> f = GgufFile::Open(Write("align", w.Bytes(alignment, version)));
      ASSERT_TRUE(f.ok()) << f.status();
      EXPECT_EQ(f->alignment(), alignment);
      const GgufTensorInfo* ta = f->FindTensor("a");
      const GgufTensorInfo* tq = f->FindTensor("q");
      ASSERT_NE(ta, nullptr);
      ASSERT_NE(tq, nullptr);
      EXPECT_EQ(ta->ne, std::vector<int64_t>({3, 2}));
      EXPECT_EQ(ta->begin % alignment, 0);
      EXPECT_EQ(tq->begin % alignment, 0);
      std::vector<float> va(6), vq(32);
      ASSERT_TRUE(f->ReadF32(*ta, va.data()).ok());
      ASSERT_TRUE(f->ReadF32(*tq, vq.data()).ok());
      EXPECT_EQ(va[5], 2.5f);
      EXPECT_EQ(vq[31], 31.0f);
    }
  }
}

// A header with `n_kv` metadata and `n_tensors` tensors followed by `rest`.
std::string Header(uint64_t n_tensors, uint64_t n_kv, const std::string& rest,
                   uint32_t version = 3) {
  std::string s = "GGUF";
  PutRaw<uint32_t>(&s, version);
  PutRaw<uint64_t>(&s, n_tensors);
  PutRaw<uint64_t>(&s, n_kv);
  return s + rest;
}

TEST(GgufFileTest, RefusesMalformedHeadersAndMetadata) {
  EXPECT_THAT(OpenError("magic", "GGUX" + std::string(20, '\0')), HasSubstr("magic"));
  EXPECT_THAT(OpenError("short", "GGU"), HasSubstr("past the end"));
  EXPECT_THAT(OpenError("v1", Header(0, 0, "", 1)), HasSubstr("version 1"));
  EXPECT_THAT(OpenError("counts", Header(uint64_t{1} << 60, 0, "")), HasSubstr("cannot fit"));
  std::string kv;
  PutStr(&kv, "k");
  PutRaw<uint32_t>(&kv, 13);
  EXPECT_THAT(OpenError("type", Header(0, 1, kv)), HasSubstr("key 'k': unknown value type 13"));
  std::string str;
  PutStr(&str, "name");
  PutRaw<uint32_t>(&str, 8);
  PutRaw<uint64_t>(&str, 1000);
  EXPECT_THAT(OpenError("strlen", Header(0, 1, str)), HasSubstr("key 'name'"));
  std::string arr;
  PutStr(&arr, "tokens");
  PutRaw<uint32_t>(&arr, 9);
  PutRaw<uint32_t>(&arr, 8);
  PutRaw<uint64_t>(&arr, uint64_t{1} << 62);
  EXPECT_THAT(OpenError("array", Header(0, 1, arr)), HasSubstr("key 'tokens': array of"));
  std::string b;
  PutStr(&b, "flag");
  PutRaw<uint32_t>(&b, 7);
  b += '\2';
  EXPECT_THAT(OpenError("bool", Header(0, 1, b)), HasSubstr("key 'flag': bool value 2"));
  GgufWriter dup;
  dup.U32("x", 1);
  dup.U32("x", 2);
  EXPECT_THAT(OpenError("dup", dup.Bytes()), HasSubstr("key 'x' appears twice"));
  GgufWriter align;
  align.U32("general.alignment", 48);
  EXPECT_THAT(OpenError("align", align.Bytes()), HasSubstr("general.alignment"));
}

TEST(GgufFileTest, RefusesBadTensorInfos) {
  const std::string block(34, '\0');
  GgufWriter type;
  type.Tensor("w", {32}, 77, block);
  EXPECT_THAT(OpenError("ttype", type.Bytes()), HasSubstr("tensor 'w'"));
  GgufWriter row;
  row.Tensor("w", {16, 2}, kGgufQ8_0, block);
  EXPECT_THAT(OpenError("row", row.Bytes()), HasSubstr("tensor 'w': row length 16"));
  GgufWriter zero;
  zero.Tensor("w", {0}, kGgufF32, "");
  EXPECT_THAT(OpenError("zero", zero.Bytes()), HasSubstr("tensor 'w'"));
  GgufWriter big;
  big.Tensor("w", {1 << 20, 1 << 20, 1 << 20, 1 << 20}, kGgufF32, "");
  EXPECT_THAT(OpenError("big", big.Bytes()), HasSubstr("tensor 'w'"));
  GgufWriter truncated;
  truncated.Tensor("w", {64}, kGgufQ8_0, block);  // needs two blocks
  EXPECT_THAT(OpenError("trunc", truncated.Bytes()), HasSubstr("tensor 'w'"));
  GgufWriter dup;
  dup.Tensor("w", {32}, kGgufQ8_0, block);
  dup.Tensor("w", {32}, kGgufQ8_0, block);
  EXPECT_THAT(OpenError("tdup", dup.Bytes()), HasSubstr("tensor 'w' appears twice"));
  // An offset that is not a multiple of the alignment, and two tensors at one offset.
  std::string infos;
  PutStr(&infos, "a");
  PutRaw<uint32_t>(&infos, 1);
  PutRaw<uint64_t>(&infos, 8);
  PutRaw<uint32_t>(&infos, kGgufF32);
  PutRaw<uint64_t>(&infos, 4);
  EXPECT_THAT(OpenError("misaligned", Header(1, 0, infos + std::string(128, '\0'))),
              HasSubstr("tensor 'a': offset 4"));
  std::string two;
  for (const char* n : {"a", "b"}) {
    PutStr(&two, n);
    PutRaw<uint32_t>(&two, 1);
    PutRaw<uint64_t>(&two, 8);
    PutRaw<uint32_t>(&two, kGgufF32);
    PutRaw<uint64_t>(&two, 0);
  }
  EXPECT_THAT(OpenError("overlap", Header(2, 0, two + std::string(128, '\0'))),
              HasSubstr("tensors 'a' and 'b' overlap"));
}

TEST(GgufFileTest, MissingFileIsNotFound) {
  EXPECT_EQ(GgufFile::Open("/nonexistent/x.gguf").status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(GgufFile::HasMagic("/nonexistent/x.gguf"));
}

}  // namespace
}  // namespace pagedkv::model_internal
