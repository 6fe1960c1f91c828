// Copyright 2026 The pagedkv Authors.
//
// Helpers shared by the op case files (tests/kernels/op_cases/op_cases_*.cc): converting read-back
// buffers to OpOutput values, the "nothing written" check of bad inputs, and the per-family lists
// that op_cases.cc joins into AllOpCases() / AllBadInputCases(). Test code only.
#ifndef PAGEDKV_TESTS_KERNELS_OP_CASES_OP_CASE_UTIL_H_
#define PAGEDKV_TESTS_KERNELS_OP_CASES_OP_CASE_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pagedkv/dtype.h"
#include "pagedkv/kernels/dtype_convert.h"
#include "pagedkv/kernels/kv_quant.h"
#include "pagedkv/kernels/rope_table.h"
#include "pagedkv/rope_config.h"
#include "pagedkv/status_macros.h"
#include "tests/kernels/op_cases/op_backend.h"
#include "tests/kernels/op_cases/op_cases.h"

namespace pagedkv::testing {

// Tolerance of KV pages of `dtype` after one rounding of a rotated fp32 value: fp32 FMA
// contraction on a GPU can move a value by an ulp before it is rounded to the dtype.
inline double PageRounding(DType dtype) {
  return dtype == DType::kF32 ? 1e-6 : (dtype == DType::kF16 ? 1e-3 : 1e-2);
}

// The same for quantized pages of values within [-2, 2]: the ulp can move a value across one
// rounding boundary, so a value may differ by one quantization step of its row (int8: 2 / 127;
// q8_0: 2 / 127; q4_0 / q4_1: 4 / 15; fp8: one step at the value's exponent, relative).
inline Tolerance QuantizedPageTolerance(DType dtype) {
  switch (dtype) {
    case DType::kInt8:
    case DType::kQ8_0:
      return {0.0, 0.02};
    case DType::kQ4_0:
    case DType::kQ4_1:
      return {0.0, 0.3};
    case DType::kFp8E4M3:
      return {0.13, 1e-3};
    case DType::kFp8E5M2:
      return {0.26, 1e-3};
    default:
      return {PageRounding(dtype), 1e-6};
  }
}

// Every quantized KV dtype (pagedkv/dtype.h).
inline constexpr DType kQuantizedKvDTypes[] = {DType::kInt8, DType::kFp8E4M3, DType::kFp8E5M2,
                                               DType::kQ8_0, DType::kQ4_0,    DType::kQ4_1};

// The values of rows [first_row, first_row + num_rows) of `head_dim` values of a quantized page
// array at `base` (rows of KvRowUnits bytes, back to back), as numbers.
inline std::vector<double> QuantizedRows(const void* base, DType dtype, int32_t head_dim,
                                         int64_t first_row, int64_t num_rows) {
  std::vector<double> out;
  std::vector<float> row(static_cast<size_t>(head_dim));
  const int64_t row_bytes = KvRowBytes(dtype, head_dim);
  for (int64_t r = first_row; r < first_row + num_rows; ++r) {
    LoadKvRow(base, dtype, r * row_bytes, head_dim, row.data());
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

template <typename T>
std::vector<double> ToDoubles(const std::vector<T>& values) {
  return std::vector<double>(values.begin(), values.end());
}

// Elements [first, first + count) of an array of `dtype` stored at `base`, as numbers.
inline std::vector<double> Elements(const void* base, DType dtype, int64_t first, int64_t count) {
  std::vector<double> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) out[i] = LoadElement(base, dtype, first + i);
  return out;
}

// A copy of `host` in `backend`'s memory (OpBuffer<T>::Upload with T deduced).
template <typename T>
absl::StatusOr<OpBuffer<T>> Upload(OpBackend& backend, const std::vector<T>& host) {
  return OpBuffer<T>::Upload(backend, host);
}

// Downloads `buffer` and adds it to `run` as an output.
template <typename T>
absl::Status AddOutput(const OpBuffer<T>& buffer, const std::string& name, Tolerance tolerance,
                       OpRun& run) {
  absl::StatusOr<std::vector<T>> host = buffer.Download();
  if (!host.ok()) return host.status();
  run.outputs.push_back({name, ToDoubles(*host), tolerance});
  return absl::OkStatus();
}

// Adds "wrote to <name>" to run.broken when `buffer` no longer holds `before` (bad inputs).
template <typename T>
absl::Status ExpectUnchanged(const OpBuffer<T>& buffer, const std::vector<T>& before,
                             const std::string& name, OpRun& run) {
  absl::StatusOr<std::vector<T>> after = buffer.Download();
  if (!after.ok()) return after.status();
  if (*after != before) run.broken.push_back("wrote to " + name);
  return absl::OkStatus();
}

// A RoPE table in a backend's memory; `view` has that backend's pointers.
struct BackendRope {
  OpBuffer<float> cos_sin;
  OpBuffer<double> inv_freq;
  RopeTableView view;
};

inline absl::StatusOr<BackendRope> UploadRope(OpBackend& b, const RopeConfig& config,
                                              int64_t num_positions) {
  PAGEDKV_ASSIGN_OR_RETURN(RopeTable table, RopeTable::Create(config, num_positions));
  BackendRope rope;
  PAGEDKV_ASSIGN_OR_RETURN(rope.cos_sin, Upload(b, table.cos_sin()));
  PAGEDKV_ASSIGN_OR_RETURN(rope.inv_freq, Upload(b, table.inv_freq()));
  rope.view = table.View();
  rope.view.cos_sin = rope.cos_sin.data();
  rope.view.inv_freq = rope.inv_freq.data();
  return rope;
}

// The cases of each family, appended in a fixed order.
void AddDenseCases(std::vector<OpCase>& cases);           // op_cases_dense.cc
void AddKvWriteCases(std::vector<OpCase>& cases);         // op_cases_kv_write.cc
void AddAttentionCases(std::vector<OpCase>& cases);       // op_cases_attention.cc
void AddBadInputCases(std::vector<BadInputCase>& cases);  // op_cases_bad_input.cc

}  // namespace pagedkv::testing

#endif  // PAGEDKV_TESTS_KERNELS_OP_CASES_OP_CASE_UTIL_H_
