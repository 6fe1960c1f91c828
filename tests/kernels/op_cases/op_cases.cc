// Copyright 2026 The pagedkv Authors.
//
// The op case runner (op_cases.h): the CPU reference backend, the list of every case, and the
// comparisons. The cases themselves are in op_cases_*.cc, one file per op family.
#include "tests/kernels/op_cases/op_cases.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "tests/kernels/op_cases/op_backend.h"
#include "tests/kernels/op_cases/op_case_util.h"

namespace pagedkv::testing {

absl::StatusOr<void*> CpuOpBackend::Allocate(size_t bytes) {
  constexpr size_t kAlignment = 64;
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  const size_t size = rounded == 0 ? kAlignment : rounded;
  void* ptr = std::aligned_alloc(kAlignment, size);
  if (ptr == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("cpu ops: cannot allocate ", bytes, " bytes"));
  }
  std::memset(ptr, 0, size);
  return ptr;
}
void CpuOpBackend::Free(void* ptr) { std::free(ptr); }
absl::Status CpuOpBackend::CopyToDevice(void* dst, const void* src, size_t bytes) {
  if (bytes != 0) std::memcpy(dst, src, bytes);
  return absl::OkStatus();
}
absl::Status CpuOpBackend::CopyToHost(void* dst, const void* src, size_t bytes) {
  if (bytes != 0) std::memcpy(dst, src, bytes);
  return absl::OkStatus();
}
absl::Status CpuOpBackend::Run(const LinearArgs& args) { return cpu::Linear(args); }
absl::Status CpuOpBackend::Run(const EmbeddingGatherArgs& args) {
  return cpu::EmbeddingGather(args);
}
absl::Status CpuOpBackend::Run(const GatherRowsArgs& args) { return cpu::GatherRows(args); }
absl::Status CpuOpBackend::Run(const RmsNormArgs& args) { return cpu::RmsNorm(args); }
absl::Status CpuOpBackend::Run(const SwiGluArgs& args) { return cpu::SwiGlu(args); }
absl::Status CpuOpBackend::Run(const LmHeadArgs& args) { return cpu::LmHead(args); }
absl::Status CpuOpBackend::Run(const ReshapeAndCacheArgs& args) {
  return cpu::ReshapeAndCache(args);
}
absl::Status CpuOpBackend::Run(const ReRotateArgs& args) { return cpu::ReRotate(args); }
absl::Status CpuOpBackend::Run(const PagedAttentionArgs& args) { return cpu::PagedAttention(args); }
absl::Status CpuOpBackend::Run(const SampleArgs& args) { return cpu::Sample(args); }

const std::vector<OpCase>& AllOpCases() {
  static const std::vector<OpCase>* const cases = [] {
    auto* list = new std::vector<OpCase>();
    AddDenseCases(*list);
    AddKvWriteCases(*list);
    AddAttentionCases(*list);
    return list;
  }();
  return *cases;
}

const std::vector<BadInputCase>& AllBadInputCases() {
  static const std::vector<BadInputCase>* const cases = [] {
    auto* list = new std::vector<BadInputCase>();
    AddBadInputCases(*list);
    return list;
  }();
  return *cases;
}

namespace {

bool Matches(double got, double want, const Tolerance& tolerance) {
  if (tolerance.rel == 0.0 && tolerance.abs == 0.0) return got == want;
  return std::abs(got - want) <= tolerance.abs + tolerance.rel * std::abs(want);
}

// One gtest failure per output that differs: the first differing element and how many differ.
void ExpectSameOutputs(const OpRun& got, const OpRun& want, const CompareOptions& options,
                       const std::string& where) {
  ASSERT_EQ(got.outputs.size(), want.outputs.size()) << where << ": number of outputs";
  for (size_t i = 0; i < got.outputs.size(); ++i) {
    const OpOutput& g = got.outputs[i];
    const OpOutput& w = want.outputs[i];
    EXPECT_EQ(g.name, w.name) << where << ": output " << i;
    if (g.values.size() != w.values.size()) {
      ADD_FAILURE() << where << ": output '" << w.name << "' has " << g.values.size()
                    << " values, want " << w.values.size();
      continue;
    }
    const Tolerance tolerance = options.exact ? Tolerance{} : w.tolerance;
    size_t first = g.values.size(), differing = 0;
    for (size_t j = 0; j < g.values.size(); ++j) {
      if (Matches(g.values[j], w.values[j], tolerance)) continue;
      if (differing++ == 0) first = j;
    }
    if (differing > 0) {
      ADD_FAILURE() << where << ": output '" << w.name << "' differs at " << differing << " of "
                    << g.values.size() << " values; first at " << first << ": got "
                    << g.values[first] << ", want " << w.values[first] << " (rel " << tolerance.rel
                    << ", abs " << tolerance.abs << ")";
    }
  }
}

void ExpectNothingBroken(const OpRun& run, const std::string& where) {
  for (const std::string& rule : run.broken) ADD_FAILURE() << where << ": " << rule;
}

// Runs `c` on the CPU ops, failing the test when that does not succeed.
absl::StatusOr<OpRun> RunOnCpu(const OpCase& c) {
  CpuOpBackend cpu;
  absl::StatusOr<OpRun> run = c.run(cpu);
  if (run.ok() && !run->status.ok()) {
    return absl::InternalError(absl::StrCat("fails on the cpu ops: ", run->status.ToString()));
  }
  if (run.ok()) ExpectNothingBroken(*run, c.name + " on cpu ops");
  return run;
}

}  // namespace

void ExpectMatchesCpu(const OpCase& c, OpBackend& backend, const CompareOptions& options) {
  const std::string where = absl::StrCat(c.name, " on ", backend.name());
  absl::StatusOr<OpRun> want = RunOnCpu(c);
  ASSERT_TRUE(want.ok()) << c.name << ": " << want.status();
  absl::StatusOr<OpRun> got = c.run(backend);
  ASSERT_TRUE(got.ok()) << where << ": set-up failed: " << got.status();
  ASSERT_TRUE(got->status.ok()) << where << ": " << got->status;
  ExpectNothingBroken(*got, where);
  ExpectSameOutputs(*got, *want, options, where);
}

void ExpectMatchesReference(const OpCase& c, OpBackend& backend) {
  const std::string where = absl::StrCat(c.name, " on ", backend.name(), " vs float64");
  ASSERT_TRUE(c.reference != nullptr) << c.name << " has no float64 reference";
  absl::StatusOr<OpRun> got = c.run(backend);
  ASSERT_TRUE(got.ok()) << where << ": set-up failed: " << got.status();
  ASSERT_TRUE(got->status.ok()) << where << ": " << got->status;
  const std::vector<std::vector<double>> reference = c.reference();
  ASSERT_EQ(reference.size(), got->outputs.size()) << where << ": number of outputs";
  OpRun want;
  for (size_t i = 0; i < reference.size(); ++i) {
    want.outputs.push_back({got->outputs[i].name, reference[i], c.reference_tolerance});
  }
  ExpectSameOutputs(*got, want, {}, where);
}

void ExpectRejected(const BadInputCase& c, OpBackend& backend) {
  if (c.kind == BadInputKind::kContents && !backend.ReportsBadContents(c.op)) return;
  const std::string where = absl::StrCat(c.name, " on ", backend.name());
  CpuOpBackend cpu;
  absl::StatusOr<OpRun> want = c.run(cpu);
  ASSERT_TRUE(want.ok()) << c.name << " on cpu ops: set-up failed: " << want.status();
  ASSERT_EQ(want->status.code(), absl::StatusCode::kInvalidArgument)
      << c.name << " on cpu ops: " << want->status;
  ExpectNothingBroken(*want, c.name + " on cpu ops");
  absl::StatusOr<OpRun> got = c.run(backend);
  ASSERT_TRUE(got.ok()) << where << ": set-up failed: " << got.status();
  EXPECT_EQ(got->status.code(), absl::StatusCode::kInvalidArgument) << where << ": " << got->status;
  EXPECT_EQ(std::string(got->status.message()), std::string(want->status.message())) << where;
  ExpectNothingBroken(*got, where);
}

void ExpectEveryCaseMatchesCpu(OpBackend& backend, const CompareOptions& options) {
  for (const OpCase& c : AllOpCases()) ExpectMatchesCpu(c, backend, options);
}

void ExpectEveryBadInputRejected(OpBackend& backend) {
  for (const BadInputCase& c : AllBadInputCases()) ExpectRejected(c, backend);
}

}  // namespace pagedkv::testing
