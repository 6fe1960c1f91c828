// Copyright 2026 The pagedkv Authors.
//
// `pagedkv study-shift --setting independent-chunks` as a separate process on the built-in
// random-weights model: a small run writes its table and CSV; bad flags exit 2 with a message
// that names the flag to fix (no abort).
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace pagedkv {
namespace {

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

Result RunStudyShift(const std::string& args) {
  Result result;
  const std::string command = std::string(PAGEDKV_CLI) + " study-shift " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) result.output.append(buf, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

TEST(StudyShiftCliTest, IndependentChunksWritesTheTableAndCsv) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "study_shift_cli_chunks";
  std::filesystem::remove_all(dir);  // no CSV of an earlier run may pass for this one's
  const Result r = RunStudyShift(
      "--setting independent-chunks --chunks 2,3 --chunk-len 8 --continuation 6 --documents 1 "
      "--fractions 0.25,1 --kv-cache-dtype f32 --out-dir " +
      dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cacheblend"), std::string::npos) << r.output;
  std::ifstream csv(dir / "chunks_quality.csv");
  std::string header;
  ASSERT_TRUE(std::getline(csv, header));
  EXPECT_EQ(header.rfind("num_chunks,variant,fraction,recomputed,mean_kl,gap_closed", 0), 0u);
  int rows = 0;
  for (std::string line; std::getline(csv, line);) ++rows;
  EXPECT_EQ(rows, 2 * (3 + 5 * 2));  // per k: full, naive, rerotated, 5 selectors x 2 fractions
}

TEST(StudyShiftCliTest, IndependentChunksWritesACsvPerDtype) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "study_shift_cli_chunks_dtypes";
  std::filesystem::remove_all(dir);
  const Result r = RunStudyShift(
      "--setting independent-chunks --chunks 2 --chunk-len 8 --continuation 6 --documents 1 "
      "--fractions 0.25 --kv-cache-dtype f32,int8 --out-dir " +
      dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "chunks_quality_f32.csv"));
  EXPECT_TRUE(std::filesystem::exists(dir / "chunks_quality_int8.csv"));
  EXPECT_FALSE(std::filesystem::exists(dir / "chunks_quality.csv"));
}

TEST(StudyShiftCliTest, BadFlagsExitTwoAndSayWhatToFix) {
  const struct {
    std::string args, says;
  } cases[] = {
      {"--setting bogus", "--setting 'bogus' is unknown"},
      {"--setting independent-chunks --chunks 0", "--chunks 0 must be in [1, 64]"},
      {"--setting independent-chunks --fractions 0.5,2", "--fractions 2 is outside [0, 1]"},
      {"--setting independent-chunks --variants oracle,bogus", "unknown independent-chunks"},
      {"--setting independent-chunks --deviation-layer 9", "--deviation-layer 9 does not exist"},
      {"--setting independent-chunks --chunks 5 --chunk-len 32", "past the model's context"},
  };
  for (const auto& c : cases) {
    const Result r = RunStudyShift(c.args + " --no-plot --out-dir " + ::testing::TempDir());
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << c.args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace pagedkv
