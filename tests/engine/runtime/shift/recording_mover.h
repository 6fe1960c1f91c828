// Copyright 2026 The pagedkv Authors.
//
// RecordingMover: a ChunkKvMover for tests that moves nothing and records every call (and the
// float keys of MoveSlotsFromKeys) in a MoverLog the test keeps; its calls return the log's
// errors.
#ifndef PAGEDKV_TESTS_ENGINE_RUNTIME_SHIFT_RECORDING_MOVER_H_
#define PAGEDKV_TESTS_ENGINE_RUNTIME_SHIFT_RECORDING_MOVER_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/runtime/shift/chunk_kv_mover.h"
#include "pagedkv/runtime/scheduler.h"

namespace pagedkv::testing {

// What a RecordingMover was asked to do, and the errors it returns.
struct MoverLog {
  std::vector<KvSlotMove> moves;        // every MoveSlots move, in order
  int32_t move_calls = 0;               // MoveSlots calls
  std::vector<int64_t> copy_src;        // every CopySlots source slot, in order
  std::vector<int64_t> copy_dst;        // every CopySlots destination slot, in order
  std::vector<int32_t> copy_positions;  // first_position of each CopySlots call
  std::vector<int32_t> move_groups;     // the group of each MoveSlots call
  std::vector<int32_t> copy_groups;     // the group of each CopySlots call
  std::vector<KvSlotMove> key_moves;    // every MoveSlotsFromKeys move, in order
  std::vector<float> keys;              // the keys of every MoveSlotsFromKeys call, in order
  std::vector<int32_t> key_groups;      // the group of each MoveSlotsFromKeys call
  absl::Status move_error;              // returned by MoveSlots and MoveSlotsFromKeys
  absl::Status copy_error;              // returned by CopySlots
};

// A ChunkKvMover that moves nothing and records its calls in a MoverLog the test keeps.
class RecordingMover final : public ChunkKvMover {
 public:
  explicit RecordingMover(MoverLog* log) : log_(log) {}
  std::string RopeFingerprint() const override { return "recording rope"; }
  absl::Status MoveSlots(int32_t group, std::span<const KvSlotMove> moves) override {
    ++log_->move_calls;
    log_->move_groups.push_back(group);
    log_->moves.insert(log_->moves.end(), moves.begin(), moves.end());
    return log_->move_error;
  }
  absl::Status MoveSlotsFromKeys(int32_t group, std::span<const KvSlotMove> moves,
                                 std::span<const float> keys) override {
    log_->key_groups.push_back(group);
    log_->key_moves.insert(log_->key_moves.end(), moves.begin(), moves.end());
    log_->keys.insert(log_->keys.end(), keys.begin(), keys.end());
    return log_->move_error;
  }
  absl::Status CopySlots(int32_t group, std::span<const int64_t> src, std::span<const int64_t> dst,
                         int32_t first_position) override {
    log_->copy_groups.push_back(group);
    log_->copy_src.insert(log_->copy_src.end(), src.begin(), src.end());
    log_->copy_dst.insert(log_->copy_dst.end(), dst.begin(), dst.end());
    log_->copy_positions.push_back(first_position);
    return log_->copy_error;
  }

 private:
  MoverLog* log_;
};

}  // namespace pagedkv::testing

#endif  // PAGEDKV_TESTS_ENGINE_RUNTIME_SHIFT_RECORDING_MOVER_H_
