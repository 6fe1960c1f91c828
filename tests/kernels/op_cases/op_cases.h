// Copyright 2026 The pagedkv Authors.
//
// One list of kernel op cases, written once and run on every backend (STYLE.md pair 5, after
// llama.cpp's test-backend-ops): each case sets up inputs from fixed seeds in an OpBackend's
// memory, runs one or more ops of the plugin table (kernels/backend_plugin_abi.h) and reads back
// what they wrote; the runner compares that with the same case on the CPU ops (CpuOpBackend),
// output by output, with tolerances that fit the dtype. Some cases also carry a float64 reference
// written from the op's formula. Bad-input cases run a call that must fail: InvalidArgument with
// the CPU ops' message, and no output buffer changed.
//
// Who runs them:
//   - tests/kernels/op_cases_test.cc: every op of the table has a case and a bad-input case; the
//     CPU ops against the float64 references; every case and bad input on the CPU ops;
//   - tests/kernels/cuda_parity_test.cc / cuda_bad_input_test.cc: the CUDA launchers (skip
//     without a device);
//   - tests/engine/model/runner/backend_ops_test.cc: every engine Backend available at run time
//   (the CPU
//     backend, the test plugin, the CUDA plugin when a device is visible).
// To add a case: append it in the op_cases_*.cc of its op family; the coverage test names any
// op of the table that has none.
//
// Example:
//   CudaLauncherBackend cuda(cublas.get(), {.check = cuda::ContentCheck::kTrusted});
//   ExpectEveryCaseMatchesCpu(cuda);   // gtest failures name the case, output and element
//   ExpectEveryBadInputRejected(cuda);  // bad-contents cases skip: trusted launches skip entries
#ifndef PAGEDKV_TESTS_KERNELS_OP_CASES_OP_CASES_H_
#define PAGEDKV_TESTS_KERNELS_OP_CASES_OP_CASES_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tests/kernels/op_cases/op_backend.h"

namespace pagedkv::testing {

// How close an output must be to the reference: |got - want| <= abs + rel * |want|. Both 0:
// exactly equal. NaN never matches.
struct Tolerance {
  double rel = 0.0;
  double abs = 0.0;
};

// One buffer a case read back after running, as numbers (activations, page elements, tokens).
struct OpOutput {
  std::string name;            // e.g. "y", "k pages after compose re-rotation"
  std::vector<double> values;  // in a layout-independent order, the same on every backend
  Tolerance tolerance;         // against the CPU ops' values
};

// What one run of a case did on one backend.
struct OpRun {
  absl::Status status;              // the first failing op's status; OK when every op succeeded
  std::vector<OpOutput> outputs;    // the same names, in the same order, on every backend
  std::vector<std::string> broken;  // rules broken on this backend, e.g. "wrote into padding"
};

// A valid call of one or more ops.
struct OpCase {
  std::string name;           // unique, "<family>/<variant>", e.g. "paged_attention/split_k/..."
  std::vector<PluginOp> ops;  // the table ops it runs, in order
  // Sets up the inputs in `backend`'s memory and runs the ops. An error is a failed set-up
  // (allocation, copy), not an op's status (that is OpRun::status).
  std::function<absl::StatusOr<OpRun>(OpBackend& backend)> run;
  // Optional: the values of every output in float64 from the op's formula (written independently
  // of the kernels; same order as run's outputs), within `reference_tolerance`. Null when the
  // op's own test file checks it against float64 (attention, RoPE, sampling).
  std::function<std::vector<std::vector<double>>()> reference;
  Tolerance reference_tolerance;
};

// Where a bad input is caught.
enum class BadInputKind {
  kArguments,  // the host-side argument check (sizes, pointers, enums): every backend
  kContents,   // index-array contents: backends with ReportsBadContents(op) only
};

// A call that must be rejected with InvalidArgument, the CPU ops' message, and nothing written.
struct BadInputCase {
  std::string name;  // unique, "<op>/<what is wrong>"
  PluginOp op;
  BadInputKind kind;
  // Sets up and runs the bad call; OpRun::broken names every buffer the call changed.
  std::function<absl::StatusOr<OpRun>(OpBackend& backend)> run;
};

// Every case, in a fixed order (built once).
const std::vector<OpCase>& AllOpCases();
const std::vector<BadInputCase>& AllBadInputCases();

// Options of ExpectMatchesCpu.
struct CompareOptions {
  bool exact = false;  // every output bit for bit (backends that run the CPU code)
};

// Runs `c` on `backend` and on CpuOpBackend: a gtest failure when an op fails, an output differs
// beyond its tolerance (naming the output and the first element), or `backend` broke a rule.
void ExpectMatchesCpu(const OpCase& c, OpBackend& backend, const CompareOptions& options = {});
// Runs `c` on `backend` against its float64 reference. REQUIRES: c.reference.
void ExpectMatchesReference(const OpCase& c, OpBackend& backend);
// Runs `c` on `backend` and on CpuOpBackend: both InvalidArgument, the same message, nothing
// written. Does nothing for a kContents case when !backend.ReportsBadContents(c.op).
void ExpectRejected(const BadInputCase& c, OpBackend& backend);

// The same over every case.
void ExpectEveryCaseMatchesCpu(OpBackend& backend, const CompareOptions& options = {});
void ExpectEveryBadInputRejected(OpBackend& backend);

}  // namespace pagedkv::testing

#endif  // PAGEDKV_TESTS_KERNELS_OP_CASES_OP_CASES_H_
