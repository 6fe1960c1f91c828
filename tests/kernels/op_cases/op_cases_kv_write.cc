// Copyright 2026 The pagedkv Authors.
//
// Op cases of the page writers: the KV write (RoPE on q and k, k and v stored at their slots) and
// re-rotation, for every RoPE scaling variant and KV dtype, and over every strided layout of
// tests/kernels/layout_cases.h (guard bytes around and between the elements must stay intact).
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "pagedkv/dtype.h"
#include "pagedkv/kernels/op_args.h"
#include "pagedkv/kernels/rope_table.h"
#include "pagedkv/rope_config.h"
#include "pagedkv/status_macros.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/layout_cases.h"
#include "tests/kernels/op_cases/op_backend.h"
#include "tests/kernels/op_cases/op_case_util.h"
#include "tests/kernels/op_cases/op_cases.h"

namespace pagedkv::testing {
namespace {

constexpr DType kDTypes[] = {DType::kF32, DType::kF16, DType::kBF16};

// e.g. "yarn_interleaved_rd64_hd64".
std::string RopeName(const RopeConfig& c) {
  return absl::StrCat(RopeScalingName(c.scaling), "_", RopeLayoutName(c.layout), "_rd",
                      c.RotaryDim(), "_hd", c.head_dim);
}

// Contiguous K then V pages of `layout`'s shape in one zeroed buffer: their elements as outputs.
absl::Status AddPages(const OpBuffer<uint8_t>& pages, const PagedKvLayout& layout,
                      const std::string& when, double k_tolerance, OpRun& run) {
  PAGEDKV_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, pages.Download());
  const int64_t n = layout.NumElements();
  if (IsQuantizedDType(layout.dtype)) {  // rows dequantized; V rows are never rotated: exact
    const int64_t rows = layout.NumSlots() * layout.num_kv_heads;
    const int32_t hd = layout.head_dim;
    // Each write or move of a key may round it one step apart: up to 3 steps after two moves.
    const double steps = k_tolerance > PageRounding(layout.dtype) ? 3.0 : 1.0;
    const Tolerance step = QuantizedPageTolerance(layout.dtype);
    run.outputs.push_back({"k pages" + when,
                           QuantizedRows(bytes.data(), layout.dtype, hd, 0, rows),
                           {steps * step.rel, steps * step.abs}});
    run.outputs.push_back(
        {"v pages" + when, QuantizedRows(bytes.data(), layout.dtype, hd, rows, rows), {}});
    return absl::OkStatus();
  }
  run.outputs.push_back(
      {"k pages" + when, Elements(bytes.data(), layout.dtype, 0, n), {k_tolerance, 1e-6}});
  run.outputs.push_back({"v pages" + when, Elements(bytes.data(), layout.dtype, n, n), {}});
  return absl::OkStatus();
}

// KV write of 9 tokens (one skipped with slot -1, positions up to 4000) into 6 blocks of 4, then
// re-rotation of 4 of them in both modes, in place and out of place.
absl::StatusOr<OpRun> RunKvWriteAndReRotate(OpBackend& b, const RopeConfig& config, DType dtype) {
  const int32_t nq = 4, nkv = 2, hd = config.head_dim;
  const int64_t n = 9;
  PAGEDKV_ASSIGN_OR_RETURN(BackendRope rope, UploadRope(b, config, 1024));
  PagedKvLayout layout{
      .dtype = dtype, .num_blocks = 6, .block_size = 4, .num_kv_heads = nkv, .head_dim = hd};
  const int64_t page_bytes = layout.NumElements() * DTypeSize(dtype);
  PAGEDKV_ASSIGN_OR_RETURN(auto pages, OpBuffer<uint8_t>::Filled(b, 2 * page_bytes, 0));
  layout.k = pages.data();
  layout.v = pages.data() + page_bytes;
  PAGEDKV_ASSIGN_OR_RETURN(auto q, Upload(b, RandomFloats(n * nq * hd, 6)));
  PAGEDKV_ASSIGN_OR_RETURN(auto k, Upload(b, RandomFloats(n * nkv * hd, 7)));
  PAGEDKV_ASSIGN_OR_RETURN(auto v, Upload(b, RandomFloats(n * nkv * hd, 8)));
  const std::vector<int32_t> host_positions = {0, 1, 2, 3, 50, 51, 700, 4000, 5};
  const std::vector<int64_t> host_slots = {0, 1, 2, 3, 9, -1, 17, 23, 12};
  PAGEDKV_ASSIGN_OR_RETURN(auto positions, Upload(b, host_positions));
  PAGEDKV_ASSIGN_OR_RETURN(auto slots, Upload(b, host_slots));
  OpRun run;
  run.status = b.Run(ReshapeAndCacheArgs{.q = q.data(),
                                         .k = k.data(),
                                         .v = v.data(),
                                         .positions = positions.data(),
                                         .slot_mapping = slots.data(),
                                         .num_tokens = n,
                                         .num_q_heads = nq,
                                         .rope = rope.view,
                                         .cache = layout});
  if (!run.status.ok()) return run;
  const double u = PageRounding(dtype);
  PAGEDKV_RETURN_IF_ERROR(AddOutput(q, "q", {1e-6, 1e-6}, run));
  PAGEDKV_RETURN_IF_ERROR(AddPages(pages, layout, "", u, run));

  const std::vector<int64_t> host_src = {0, 9, 17, 23}, host_dst = {0, 4, 18, 23};
  const std::vector<int32_t> host_old = {0, 50, 700, 4000}, host_new = {33, 7, 3000, 1};
  PAGEDKV_ASSIGN_OR_RETURN(auto src, Upload(b, host_src));
  PAGEDKV_ASSIGN_OR_RETURN(auto dst, Upload(b, host_dst));
  PAGEDKV_ASSIGN_OR_RETURN(auto old_pos, Upload(b, host_old));
  PAGEDKV_ASSIGN_OR_RETURN(auto new_pos, Upload(b, host_new));
  for (ReRotateMode mode : {ReRotateMode::kCompose, ReRotateMode::kDelta}) {
    run.status = b.Run(ReRotateArgs{.src_slots = src.data(),
                                    .dst_slots = dst.data(),
                                    .old_positions = old_pos.data(),
                                    .new_positions = new_pos.data(),
                                    .num_tokens = 4,
                                    .mode = mode,
                                    .rope = rope.view,
                                    .cache = layout});
    if (!run.status.ok()) return run;
    const char* name = mode == ReRotateMode::kCompose ? "compose" : "delta";
    PAGEDKV_RETURN_IF_ERROR(
        AddPages(pages, layout, absl::StrCat(" after ", name, " re-rotation"), 2 * u, run));
  }
  return run;
}

// KV write of 7 tokens and a re-rotation of 3 over one layout case: the backend's buffer is a
// copy of the guarded host buffer, and its padding must come back untouched.
absl::StatusOr<OpRun> RunKvWriteOverLayout(OpBackend& b, const LayoutCase& c, DType dtype) {
  const CaseShape shape;
  RopeConfig config;
  config.head_dim = shape.head_dim;
  config.rotary_dim = 12;
  const int32_t nq = 6;
  const int64_t n = 7, row = int64_t{shape.num_kv_heads} * shape.head_dim;
  PAGEDKV_ASSIGN_OR_RETURN(BackendRope rope, UploadRope(b, config, 256));
  GuardedPages host(c, dtype, shape);
  PAGEDKV_ASSIGN_OR_RETURN(auto pages, Upload(b, host.bytes()));
  const PagedKvLayout layout = c.make(reinterpret_cast<char*>(pages.data()) + kGuardBytes, dtype);
  PAGEDKV_ASSIGN_OR_RETURN(auto q, Upload(b, RandomFloats(n * nq * shape.head_dim, 80)));
  PAGEDKV_ASSIGN_OR_RETURN(auto k, Upload(b, RandomFloats(n * row, 81)));
  PAGEDKV_ASSIGN_OR_RETURN(auto v, Upload(b, RandomFloats(n * row, 82)));
  const std::vector<int32_t> host_positions = {0, 3, 77, 12, 200, 5, 9};
  const std::vector<int64_t> host_slots = {0, 19, -1, 7, 4, 12, 3};
  const std::vector<int64_t> host_src = {0, 19, 7}, host_dst = {1, 19, 8};
  const std::vector<int32_t> host_old = {0, 3, 12}, host_new = {90, 4, 250};
  PAGEDKV_ASSIGN_OR_RETURN(auto positions, Upload(b, host_positions));
  PAGEDKV_ASSIGN_OR_RETURN(auto slots, Upload(b, host_slots));
  PAGEDKV_ASSIGN_OR_RETURN(auto src, Upload(b, host_src));
  PAGEDKV_ASSIGN_OR_RETURN(auto dst, Upload(b, host_dst));
  PAGEDKV_ASSIGN_OR_RETURN(auto old_pos, Upload(b, host_old));
  PAGEDKV_ASSIGN_OR_RETURN(auto new_pos, Upload(b, host_new));
  OpRun run;
  run.status = b.Run(ReshapeAndCacheArgs{.q = q.data(),
                                         .k = k.data(),
                                         .v = v.data(),
                                         .positions = positions.data(),
                                         .slot_mapping = slots.data(),
                                         .num_tokens = n,
                                         .num_q_heads = nq,
                                         .rope = rope.view,
                                         .cache = layout});
  if (!run.status.ok()) return run;
  run.status = b.Run(ReRotateArgs{.src_slots = src.data(),
                                  .dst_slots = dst.data(),
                                  .old_positions = old_pos.data(),
                                  .new_positions = new_pos.data(),
                                  .num_tokens = 3,
                                  .rope = rope.view,
                                  .cache = layout});
  if (!run.status.ok()) return run;
  PAGEDKV_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, pages.Download());
  if (const int64_t damaged = host.DamagedGuardBytes(bytes); damaged != 0) {
    run.broken.push_back(absl::StrCat("wrote into the layout's padding (", damaged, " bytes)"));
  }
  const std::vector<float> logical = host.Logical(bytes);  // K then V
  const size_t half = logical.size() / 2;
  const double u = PageRounding(dtype);
  PAGEDKV_RETURN_IF_ERROR(AddOutput(q, "q", {1e-6, 1e-6}, run));
  run.outputs.push_back(
      {"k", std::vector<double>(logical.begin(), logical.begin() + half), {2 * u, 1e-6}});
  run.outputs.push_back({"v", std::vector<double>(logical.begin() + half, logical.end()), {}});
  return run;
}

// The float-key path (issue 41): the KV write of 6 tokens hands back its rotated keys, then 4
// of them move from those floats (one in place, one unshifted) rather than from the pages.
absl::StatusOr<OpRun> RunFloatKeyMove(OpBackend& b, DType dtype) {
  RopeConfig config;
  config.head_dim = 64;
  const int32_t nkv = 2, hd = config.head_dim;
  const int64_t n = 6, row = int64_t{nkv} * hd;
  PAGEDKV_ASSIGN_OR_RETURN(BackendRope rope, UploadRope(b, config, 1024));
  PagedKvLayout layout{
      .dtype = dtype, .num_blocks = 4, .block_size = 4, .num_kv_heads = nkv, .head_dim = hd};
  const int64_t page_bytes = layout.NumElements() * DTypeSize(dtype);
  PAGEDKV_ASSIGN_OR_RETURN(auto pages, OpBuffer<uint8_t>::Filled(b, 2 * page_bytes, 0));
  layout.k = pages.data();
  layout.v = pages.data() + page_bytes;
  PAGEDKV_ASSIGN_OR_RETURN(auto k, Upload(b, RandomFloats(n * row, 91)));
  PAGEDKV_ASSIGN_OR_RETURN(auto v, Upload(b, RandomFloats(n * row, 92)));
  PAGEDKV_ASSIGN_OR_RETURN(auto rotated, OpBuffer<float>::Filled(b, n * row, 0.0f));
  PAGEDKV_ASSIGN_OR_RETURN(auto positions, Upload(b, std::vector<int32_t>{0, 9, 40, 700, 3, 5}));
  PAGEDKV_ASSIGN_OR_RETURN(auto slots, Upload(b, std::vector<int64_t>{0, 1, 2, 3, -1, 5}));
  OpRun run;
  run.status = b.Run(ReshapeAndCacheArgs{.k = k.data(),
                                         .v = v.data(),
                                         .positions = positions.data(),
                                         .slot_mapping = slots.data(),
                                         .num_tokens = n,
                                         .rope = rope.view,
                                         .cache = layout,
                                         .rotated_k = rotated.data()});
  if (!run.status.ok()) return run;
  PAGEDKV_RETURN_IF_ERROR(AddOutput(rotated, "rotated keys", {1e-6, 1e-6}, run));
  PAGEDKV_ASSIGN_OR_RETURN(std::vector<float> host_rotated, rotated.Download());
  const std::vector<int64_t> token = {0, 1, 2, 3};  // moved tokens: their keys, in move order
  std::vector<float> host_keys;
  for (int64_t t : token) {
    host_keys.insert(host_keys.end(), host_rotated.begin() + t * row,
                     host_rotated.begin() + (t + 1) * row);
  }
  PAGEDKV_ASSIGN_OR_RETURN(auto keys, Upload(b, host_keys));
  PAGEDKV_ASSIGN_OR_RETURN(auto src, Upload(b, std::vector<int64_t>{0, 1, 2, 3}));
  PAGEDKV_ASSIGN_OR_RETURN(auto dst, Upload(b, std::vector<int64_t>{8, 1, 10, 11}));
  PAGEDKV_ASSIGN_OR_RETURN(auto old_pos, Upload(b, std::vector<int32_t>{0, 9, 40, 700}));
  PAGEDKV_ASSIGN_OR_RETURN(auto new_pos, Upload(b, std::vector<int32_t>{33, 20, 40, 2}));
  run.status = b.Run(ReRotateArgs{.src_slots = src.data(),
                                  .dst_slots = dst.data(),
                                  .old_positions = old_pos.data(),
                                  .new_positions = new_pos.data(),
                                  .num_tokens = 4,
                                  .rope = rope.view,
                                  .cache = layout,
                                  .src_keys = keys.data()});
  if (!run.status.ok()) return run;
  PAGEDKV_RETURN_IF_ERROR(
      AddPages(pages, layout, " after a move from float keys", PageRounding(dtype), run));
  return run;
}

}  // namespace

void AddKvWriteCases(std::vector<OpCase>& cases) {
  const std::vector<PluginOp> ops = {OpFor<ReshapeAndCacheArgs>(), OpFor<ReRotateArgs>()};
  for (const RopeConfig& config : AllScalingConfigs()) {
    for (DType dtype : kDTypes) {
      cases.push_back(
          {.name = absl::StrCat("kv_write_and_rerotate/", RopeName(config), "/", DTypeName(dtype)),
           .ops = ops,
           .run = [config, dtype](OpBackend& b) {
             return RunKvWriteAndReRotate(b, config, dtype);
           }});
    }
  }
  // Quantized pages: every dtype over full and partial rotation, both pair layouts.
  for (const RopeConfig& config : AllScalingConfigs()) {
    if (config.scaling != RopeScaling::kNone) continue;
    for (DType dtype : kQuantizedKvDTypes) {
      cases.push_back(
          {.name = absl::StrCat("kv_write_and_rerotate/", RopeName(config), "/", DTypeName(dtype)),
           .ops = ops,
           .run = [config, dtype](OpBackend& b) {
             return RunKvWriteAndReRotate(b, config, dtype);
           }});
    }
  }
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kInt8, DType::kFp8E4M3, DType::kQ4_1}) {
    cases.push_back({.name = absl::StrCat("kv_write_float_key_move/", DTypeName(dtype)),
                     .ops = ops,
                     .run = [dtype](OpBackend& b) { return RunFloatKeyMove(b, dtype); }});
  }
  for (DType dtype : kDTypes) {
    for (const LayoutCase& layout : AllLayoutCases()) {
      cases.push_back({.name = absl::StrCat("kv_write_and_rerotate/layout_", layout.name, "/",
                                            DTypeName(dtype)),
                       .ops = ops,
                       .run = [layout, dtype](OpBackend& b) {
                         return RunKvWriteOverLayout(b, layout, dtype);
                       }});
    }
  }
}

}  // namespace pagedkv::testing
