// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/workload/mooncake_trace.h"

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/shared_data.h"

namespace pagedkv::replay {
namespace {

using ::testing::HasSubstr;

constexpr char kGood[] =
    R"({"timestamp": 0, "input_length": 1000, "output_length": 7, "hash_ids": [1, 2]})"
    "\n"
    R"({"timestamp": 12.5, "input_length": 512, "output_length": 0, "hash_ids": [1], "x": [1]})"
    "\r\n"
    "\n"
    R"({"hash_ids": [1, 2, 3], "output_length": 3, "input_length": 1025, "timestamp": 13})"
    "\n";

std::filesystem::path TempPath(const std::string& name) {
  return std::filesystem::path(::testing::TempDir()) / name;
}

TEST(MooncakeTraceTest, ParsesGoodLinesInAnyFieldOrder) {
  auto w = ParseMooncakeTrace(kGood, {.trace_block_size = 512});
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->requests.size(), 3u);
  EXPECT_EQ(w->trace_block_size, 512);
  EXPECT_EQ(w->skipped_lines, 0);
  const ReplayRequest& a = w->requests[0];
  EXPECT_EQ(a.arrival_ms, 0);
  EXPECT_EQ(a.input_length, 1000);
  EXPECT_EQ(a.output_length, 7);
  ASSERT_EQ(a.segments.size(), 2u);
  EXPECT_EQ(a.segments[0].content_id, 1u);
  EXPECT_EQ(a.segments[0].length, 512);
  EXPECT_EQ(a.segments[1].content_id, 2u);
  EXPECT_EQ(a.segments[1].length, 488);  // the last partial block
  EXPECT_EQ(w->requests[1].arrival_ms, 12.5);
  EXPECT_EQ(w->requests[1].segments.size(), 1u);
  EXPECT_EQ(w->requests[2].segments.back().length, 1);
  EXPECT_TRUE(ValidateWorkload(*w).ok());
}

struct BadLine {
  std::string line;
  std::string expected;  // substring of the error
};

class MalformedLineTest : public ::testing::TestWithParam<BadLine> {};

TEST_P(MalformedLineTest, ReportsLineNumberAndProblem) {
  const std::string text =
      R"({"timestamp": 5, "input_length": 10, "output_length": 1, "hash_ids": [9]})"
      "\n" +
      GetParam().line + "\n" +
      R"({"timestamp": 6, "input_length": 10, "output_length": 1, "hash_ids": [9]})" + "\n";
  auto w = ParseMooncakeTrace(text, {.trace_block_size = 512}, "t.jsonl");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(w.status().message(), HasSubstr("t.jsonl: line 2: "));
  EXPECT_THAT(w.status().message(), HasSubstr(GetParam().expected));

  auto skipped = ParseMooncakeTrace(text, {.trace_block_size = 512, .skip_bad_lines = true});
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_EQ(skipped->skipped_lines, 1);
  EXPECT_EQ(skipped->requests.size(), 2u);
}

INSTANTIATE_TEST_SUITE_P(
    AllKinds, MalformedLineTest,
    ::testing::Values(
        BadLine{R"({"timestamp": 5, "input_length": 10, )", "not valid JSON"},
        BadLine{R"(not json at all)", ""}, BadLine{R"([1, 2, 3])", "expected a JSON object"},
        BadLine{R"({"timestamp": 5, "input_length": 10, "output_length": 1})",
                "missing field \"hash_ids\""},
        BadLine{R"({"input_length": 10, "output_length": 1, "hash_ids": [9]})",
                "missing field \"timestamp\""},
        BadLine{R"({"timestamp": "5", "input_length": 10, "output_length": 1, "hash_ids": [9]})",
                "\"timestamp\" must be a number"},
        BadLine{R"({"timestamp": -1, "input_length": 10, "output_length": 1, "hash_ids": [9]})",
                "\"timestamp\" must be >= 0"},
        BadLine{R"({"timestamp": 5, "input_length": "ten", "output_length": 1, "hash_ids": [9]})",
                "\"input_length\" must be an integer"},
        BadLine{R"({"timestamp": 5, "input_length": 2.5, "output_length": 1, "hash_ids": [9]})",
                "\"input_length\" must be an integer"},
        BadLine{R"({"timestamp": 5, "input_length": 0, "output_length": 1, "hash_ids": []})",
                "\"input_length\" must be in [1, 2^31]"},
        BadLine{R"({"timestamp": 5, "input_length": 10, "output_length": -3, "hash_ids": [9]})",
                "\"output_length\" must be >= 0"},
        BadLine{R"({"timestamp": 5, "input_length": 10, "output_length": 1, "hash_ids": 9})",
                "\"hash_ids\" must be an array"},
        BadLine{R"({"timestamp": 5, "input_length": 600, "output_length": 1, "hash_ids": [9, -2]})",
                "\"hash_ids\"[1] must be a non-negative integer"},
        BadLine{
            R"({"timestamp": 5, "input_length": 600, "output_length": 1, "hash_ids": [9, "a"]})",
            "\"hash_ids\"[1] must be a non-negative integer"},
        BadLine{R"({"timestamp": 5, "input_length": 1100, "output_length": 1, "hash_ids": [9]})",
                "1 hash_ids but input_length 1100 at trace block size 512 needs 3"},
        BadLine{R"({"timestamp": 4, "input_length": 10, "output_length": 1, "hash_ids": [9]})",
                "timestamp 4 is before the previous line's 5"},
        BadLine{
            R"({"timestamp": 5, "input_length": 10, "output_length": 1, "hash_ids": [9]} {"a": 1})",
            "unexpected content after the JSON object"}));

TEST(MooncakeTraceTest, RejectsBadTraceBlockSize) {
  auto w = ParseMooncakeTrace(kGood, {.trace_block_size = 0});
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(w.status().message(), HasSubstr("--trace-block-size must be > 0"));
}

TEST(MooncakeTraceTest, ReadsGzipAndPlainFilesAlike) {
  const auto plain = TempPath("trace_plain.jsonl");
  const auto gz = TempPath("trace.jsonl.gz");
  {
    std::ofstream out(plain);
    out << kGood;
  }
  gzFile f = gzopen(gz.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, kGood, sizeof(kGood) - 1), static_cast<int>(sizeof(kGood) - 1));
  gzclose(f);
  auto a = LoadMooncakeTrace(plain.string(), {});
  auto b = LoadMooncakeTrace(gz.string(), {});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(a->requests.size(), b->requests.size());
  for (size_t i = 0; i < a->requests.size(); ++i) {
    EXPECT_EQ(a->requests[i].input_length, b->requests[i].input_length);
    EXPECT_EQ(a->requests[i].segments.size(), b->requests[i].segments.size());
  }
  EXPECT_EQ(b->name, "trace.jsonl.gz");
}

TEST(MooncakeTraceTest, TruncatedGzipIsDataLoss) {
  const auto gz = TempPath("full.jsonl.gz");
  std::string big;
  for (int i = 0; i < 2000; ++i) {
    big += R"({"timestamp": 0, "input_length": 1000, "output_length": 7, "hash_ids": [1, 2]})";
    big += "\n";
  }
  gzFile f = gzopen(gz.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  gzwrite(f, big.data(), static_cast<unsigned>(big.size()));
  gzclose(f);
  const auto size = std::filesystem::file_size(gz);
  const auto cut = TempPath("cut.jsonl.gz");
  std::filesystem::copy_file(gz, cut, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(cut, size / 2);
  auto w = LoadMooncakeTrace(cut.string(), {});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kDataLoss);
}

// Writes `text` gzip-compressed to `path`.
void WriteGzip(const std::filesystem::path& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())),
            static_cast<int>(text.size()));
  gzclose(f);
}

TEST(MooncakeTraceTest, StreamedLoadKeepsLineNumbers) {
  const auto gz = TempPath("lines.jsonl.gz");
  WriteGzip(gz, kGood);
  auto w = LoadMooncakeTrace(gz.string(), {});
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->requests.size(), 3u);
  EXPECT_EQ(w->requests[0].source_line, 1);
  EXPECT_EQ(w->requests[1].source_line, 2);
  EXPECT_EQ(w->requests[2].source_line, 4);  // line 3 is blank
}

// A gzip bomb (a few KB that decompress to megabytes of one line, or to more than the file
// bound) stops the load with a clear error instead of growing without bound.
TEST(MooncakeTraceTest, GzipBombsAndHugeLinesAreBounded) {
  const auto line_bomb = TempPath("line_bomb.jsonl.gz");
  WriteGzip(line_bomb, std::string(8 << 20, ' '));  // 8 MiB, no newline
  auto long_line = LoadMooncakeTrace(line_bomb.string(), {.max_line_bytes = 1 << 20});
  ASSERT_FALSE(long_line.ok());
  EXPECT_EQ(long_line.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(long_line.status().message(), HasSubstr("line 1 is longer than 1048576 bytes"));

  const auto size_bomb = TempPath("size_bomb.jsonl.gz");
  WriteGzip(size_bomb, std::string(8 << 20, '\n'));
  auto too_big = LoadMooncakeTrace(size_bomb.string(), {.max_decompressed_bytes = 1 << 20});
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(too_big.status().message(), HasSubstr("gzip bomb"));
}

TEST(MooncakeTraceTest, MemoryLimitNamesTheLine) {
  std::string many;
  for (int i = 0; i < 1000; ++i) {
    many += R"({"timestamp": 0, "input_length": 1000, "output_length": 7, "hash_ids": [1, 2]})";
    many += "\n";
  }
  auto w = ParseMooncakeTrace(many, {.memory_limit_bytes = 10000}, "many");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(w.status().message(), HasSubstr("many: line "));
  EXPECT_THAT(w.status().message(), HasSubstr("--max-memory-gib"));
  EXPECT_TRUE(ParseMooncakeTrace(many, {}, "many").ok());
}

TEST(MooncakeTraceTest, MissingFileIsNotFound) {
  auto w = LoadMooncakeTrace(TempPath("no_such_trace.jsonl").string(), {});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(w.status().message(), HasSubstr("not found"));
}

TEST(MooncakeTraceTest, LoadsTheSharedConversationTrace) {
  auto dir = pagedkv::testing::SharedDataDir();
  if (!dir) GTEST_SKIP() << pagedkv::testing::kNoSharedDataMessage;
  const auto path = *dir / "traces/conversation_trace.jsonl.gz";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not found";
  auto w = LoadMooncakeTrace(path.string(), {.trace_block_size = 512});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_GT(w->requests.size(), 1000u);
  EXPECT_EQ(w->skipped_lines, 0);
  EXPECT_TRUE(ValidateWorkload(*w).ok());
}

}  // namespace
}  // namespace pagedkv::replay
