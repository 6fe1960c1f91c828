// Copyright 2026 The pagedkv Authors.
#include "engine/runtime/shift/rerotate_slots.h"

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/model/runner/backend.h"
#include "pagedkv/kernels/op_args.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

// A host array placed where `backend` computes: the host pointer itself on a host backend, a
// device copy otherwise.
template <typename T>
absl::StatusOr<const T*> Place(Backend& backend, std::span<const T> host, DeviceBuffer* storage) {
  if (backend.host_memory()) return host.data();
  const size_t bytes = host.size_bytes();
  PAGEDKV_ASSIGN_OR_RETURN(*storage, DeviceBuffer::Create(backend, bytes));
  PAGEDKV_RETURN_IF_ERROR(backend.CopyToDevice(storage->data(), host.data(), bytes));
  return storage->as<const T>();
}

// The layers `move` names (its list, or its range), checked against the runner's model.
absl::StatusOr<std::vector<int32_t>> LayersOf(const SlotMove& move, const ModelRunner& runner) {
  const int32_t layers = runner.config().n_layers;
  if (!move.layers.empty()) {
    for (const int32_t l : move.layers) {
      if (l < 0 || l >= layers) {
        return absl::InvalidArgumentError(
            absl::StrCat("ReRotateSlots: layer ", l, " outside the model's ", layers));
      }
    }
    return std::vector<int32_t>(move.layers.begin(), move.layers.end());
  }
  const int32_t count = move.num_layers < 0 ? layers - move.first_layer : move.num_layers;
  if (move.first_layer < 0 || count < 0 || move.first_layer + count > layers) {
    return absl::InvalidArgumentError(absl::StrCat("ReRotateSlots: layers [", move.first_layer,
                                                   ", +", count, ") outside the model's ", layers));
  }
  std::vector<int32_t> range(static_cast<size_t>(count));
  for (int32_t i = 0; i < count; ++i) range[static_cast<size_t>(i)] = move.first_layer + i;
  return range;
}

// This pass's float keys, [layers, tokens.size(), width], from `keys` ([layers, n, width]): the
// span itself when the pass moves every token (nothing copied), else a gather into `storage`.
std::span<const float> PassKeys(std::span<const float> keys, size_t n, size_t width,
                                const std::vector<size_t>& tokens, std::vector<float>* storage) {
  if (keys.empty() || tokens.size() == n) return keys;
  const size_t layers = keys.size() / (n * width);
  storage->resize(layers * tokens.size() * width);
  float* out = storage->data();
  for (size_t l = 0; l < layers; ++l) {
    for (const size_t t : tokens) out = std::copy_n(keys.data() + (l * n + t) * width, width, out);
  }
  return *storage;
}

}  // namespace

absl::Status ReRotateSlots(ModelRunner& runner, const SlotMove& move) {
  const size_t n = move.src.size();
  if (move.dst.size() != n || move.old_positions.size() != n || move.new_positions.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReRotateSlots: src, dst, old_positions and new_positions need equal sizes, got ", n, ", ",
        move.dst.size(), ", ", move.old_positions.size(), ", ", move.new_positions.size()));
  }
  PAGEDKV_ASSIGN_OR_RETURN(const std::vector<int32_t> layers, LayersOf(move, runner));
  const auto width = static_cast<size_t>(runner.config().kv_dim());
  if (!move.src_keys.empty() && move.src_keys.size() != layers.size() * n * width) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReRotateSlots: src_keys has ", move.src_keys.size(), " floats, expected ", layers.size(),
        " layers x ", n, " tokens x ", width, " (n_kv_heads * head_dim)"));
  }
  Backend& backend = runner.backend();
  // Pass 0: unshifted tokens through R(0) (exact copy); pass 1: shifted ones in `move.mode`.
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<int64_t> s, d;
    std::vector<int32_t> o, p;
    std::vector<size_t> tokens;
    for (size_t i = 0; i < n; ++i) {
      if ((move.old_positions[i] == move.new_positions[i]) != (pass == 0)) continue;
      tokens.push_back(i);
      s.push_back(move.src[i]);
      d.push_back(move.dst[i]);
      o.push_back(move.old_positions[i]);
      p.push_back(move.new_positions[i]);
    }
    if (s.empty()) continue;
    DeviceBuffer sb, db, ob, pb;
    PAGEDKV_ASSIGN_OR_RETURN(const int64_t* s_ptr, Place<int64_t>(backend, s, &sb));
    PAGEDKV_ASSIGN_OR_RETURN(const int64_t* d_ptr, Place<int64_t>(backend, d, &db));
    PAGEDKV_ASSIGN_OR_RETURN(const int32_t* o_ptr, Place<int32_t>(backend, o, &ob));
    PAGEDKV_ASSIGN_OR_RETURN(const int32_t* p_ptr, Place<int32_t>(backend, p, &pb));
    std::vector<float> gathered;
    const std::span<const float> keys = PassKeys(move.src_keys, n, width, tokens, &gathered);
    DeviceBuffer kb;  // lives through the pass's launches
    const float* k_ptr = nullptr;
    if (!keys.empty()) {
      PAGEDKV_ASSIGN_OR_RETURN(k_ptr, Place<float>(backend, keys, &kb));
    }
    for (size_t li = 0; li < layers.size(); ++li) {
      const int32_t l = layers[li];
      ReRotateArgs args;
      if (k_ptr != nullptr) args.src_keys = k_ptr + li * s.size() * width;
      args.src_slots = s_ptr;
      args.dst_slots = d_ptr;
      args.old_positions = o_ptr;
      args.new_positions = p_ptr;
      args.num_tokens = static_cast<int64_t>(s.size());
      args.mode = pass == 0 ? ReRotateMode::kDelta : move.mode;
      args.rope = runner.rope_view();
      args.cache = runner.kv_layout(l);
      PAGEDKV_RETURN_IF_ERROR(backend.ReRotate(args));
    }
    PAGEDKV_RETURN_IF_ERROR(backend.Synchronize());
  }
  return absl::OkStatus();
}

}  // namespace pagedkv
