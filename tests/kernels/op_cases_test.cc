// Copyright 2026 The pagedkv Authors.
//
// The op case list itself (tests/kernels/op_cases/op_cases.h): every compute op of the plugin table
// (PAGEDKV_PLUGIN_OPS) has a case and a bad-input case, names are unique, and on the CPU ops every
// case runs cleanly, twice alike, within its float64 reference, and every bad input is refused.
// The other backends run the same list in cuda_parity_test.cc, cuda_bad_input_test.cc and
// tests/engine/model/runner/backend_ops_test.cc.
#include "tests/kernels/op_cases/op_cases.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "kernels/backend_plugin_abi.h"
#include "tests/kernels/op_cases/op_backend.h"

namespace pagedkv::testing {
namespace {

// The ops of the table that no entry of `covered` names.
std::vector<std::string> Uncovered(const std::set<size_t>& covered) {
  std::vector<std::string> missing;
  for (PluginOp op : AllPluginOps()) {
    if (covered.count(op.index) == 0) missing.push_back(std::string(op.name()));
  }
  return missing;
}

TEST(OpCasesTest, EveryPluginOpHasACase) {
  std::set<size_t> covered;
  for (const OpCase& c : AllOpCases()) {
    for (PluginOp op : c.ops) covered.insert(op.index);
  }
  const std::vector<std::string> missing = Uncovered(covered);
  EXPECT_TRUE(missing.empty()) << "plugin table ops without an op case: "
                               << absl::StrJoin(missing, ", ")
                               << " (add one to tests/kernels/op_cases/op_cases_*.cc)";
  EXPECT_EQ(AllPluginOps().size(), kPagedkvPluginNumOps);
}

TEST(OpCasesTest, EveryPluginOpHasABadInputCase) {
  std::set<size_t> covered;
  for (const BadInputCase& c : AllBadInputCases()) covered.insert(c.op.index);
  const std::vector<std::string> missing = Uncovered(covered);
  EXPECT_TRUE(missing.empty()) << "plugin table ops without a bad-input case: "
                               << absl::StrJoin(missing, ", ")
                               << " (add one to tests/kernels/op_cases/op_cases_bad_input.cc)";
}

TEST(OpCasesTest, OpForNamesTheTableMember) {
  EXPECT_EQ(OpFor<LinearArgs>().name(), "linear");
  EXPECT_EQ(OpFor<ReshapeAndCacheArgs>().name(), "reshape_and_cache");
  EXPECT_EQ(OpFor<SampleArgs>().name(), "sample");
}

TEST(OpCasesTest, NamesAreUnique) {
  std::set<std::string> names;
  for (const OpCase& c : AllOpCases()) {
    EXPECT_TRUE(names.insert(c.name).second) << "two op cases are named " << c.name;
    EXPECT_FALSE(c.ops.empty()) << c.name;
  }
  for (const BadInputCase& c : AllBadInputCases()) {
    EXPECT_TRUE(names.insert(c.name).second) << "two cases are named " << c.name;
  }
}

// Runs every case on the CPU ops against itself: no op fails, no rule is broken, and a second
// run gives the same bits (the inputs come from fixed seeds).
TEST(OpCasesTest, EveryCaseRunsCleanlyAndReproduciblyOnTheCpuOps) {
  CpuOpBackend cpu;
  ExpectEveryCaseMatchesCpu(cpu, {.exact = true});
}

TEST(OpCasesTest, CpuOpsMatchTheFloat64References) {
  CpuOpBackend cpu;
  int checked = 0;
  for (const OpCase& c : AllOpCases()) {
    if (c.reference == nullptr) continue;
    ExpectMatchesReference(c, cpu);
    ++checked;
  }
  EXPECT_GE(checked, 5);
}

TEST(OpCasesTest, CpuOpsRejectEveryBadInput) {
  CpuOpBackend cpu;
  ExpectEveryBadInputRejected(cpu);
}

}  // namespace
}  // namespace pagedkv::testing
