// Copyright 2026 The pagedkv Authors.
//
// ModelRunner::ValidateInput: the whole of a step's input is checked before anything is written
// (shapes, token ids, slots, each sequence's block table and positions, logits rows, sampling).
#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/model/runner/model_runner.h"
#include "kernels/content_checks.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/types.h"

namespace pagedkv {

absl::Status ModelRunner::ValidateInput(const ModelInput& in, const ForwardOptions& options) const {
  PAGEDKV_RETURN_IF_ERROR(ValidateShapes(in));
  PAGEDKV_RETURN_IF_ERROR(ValidateTokens(in));
  const auto num_seqs = static_cast<int64_t>(in.query_start_loc.size()) - 1;
  for (int64_t s = 0; s < num_seqs; ++s) PAGEDKV_RETURN_IF_ERROR(ValidateSequence(in, s));
  PAGEDKV_RETURN_IF_ERROR(ValidateOutputs(in, options));
  PAGEDKV_RETURN_IF_ERROR(ValidateGroups(in, options));
  if (options.hook != nullptr) return options.hook->Validate(in, config());
  return absl::OkStatus();
}

absl::Status ModelRunner::ValidateShapes(const ModelInput& in) const {
  const auto num_tokens = static_cast<int64_t>(in.token_ids.size());
  if (in.positions.size() != in.token_ids.size() || in.slot_mapping.size() != in.token_ids.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ModelInput: token_ids, positions and slot_mapping must have equal sizes, got ",
        in.token_ids.size(), ", ", in.positions.size(), ", ", in.slot_mapping.size()));
  }
  if (in.query_start_loc.empty()) {
    return absl::InvalidArgumentError("ModelInput: query_start_loc needs num_seqs + 1 entries");
  }
  const auto num_seqs = static_cast<int64_t>(in.query_start_loc.size()) - 1;
  if (static_cast<int64_t>(in.kv_lens.size()) != num_seqs) {
    return absl::InvalidArgumentError(absl::StrCat("ModelInput: kv_lens has ", in.kv_lens.size(),
                                                   " entries for ", num_seqs, " sequences"));
  }
  if (in.max_blocks_per_seq < 0 ||
      static_cast<int64_t>(in.block_tables.size()) != num_seqs * in.max_blocks_per_seq) {
    return absl::InvalidArgumentError(
        absl::StrCat("ModelInput: block_tables has ", in.block_tables.size(),
                     " entries, expected num_seqs * max_blocks_per_seq = ", num_seqs, " * ",
                     in.max_blocks_per_seq));
  }
  if (in.query_start_loc.front() != 0 || in.query_start_loc.back() != num_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ModelInput: query_start_loc must run from 0 to the number of tokens ", num_tokens));
  }
  return absl::OkStatus();
}

absl::Status ModelRunner::ValidateTokens(const ModelInput& in) const {
  const int32_t vocab_size = config().vocab_size;
  const int64_t num_slots = int64_t{options_.num_blocks} * options_.block_size;
  for (size_t i = 0; i < in.token_ids.size(); ++i) {
    if (in.token_ids[i] < 0 || in.token_ids[i] >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("ModelInput: token_ids[", i,
                                                     "] = ", in.token_ids[i], " is outside [0, ",
                                                     vocab_size, ")"));
    }
    if (in.slot_mapping[i] < -1 || in.slot_mapping[i] >= num_slots) {
      return absl::InvalidArgumentError(absl::StrCat("ModelInput: slot_mapping[", i,
                                                     "] = ", in.slot_mapping[i],
                                                     " is outside [-1, ", num_slots, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status ModelRunner::ValidateSequence(const ModelInput& in, int64_t s) const {
  const int32_t begin = in.query_start_loc[static_cast<size_t>(s)];
  const int32_t end = in.query_start_loc[static_cast<size_t>(s) + 1];
  if (end < begin) {
    return absl::InvalidArgumentError(
        absl::StrCat("ModelInput: query_start_loc decreases at sequence ", s));
  }
  const int32_t kv_len = in.kv_lens[static_cast<size_t>(s)];
  const int64_t blocks_needed = NumBlocksFor(kv_len, options_.block_size);
  if (kv_len < 1 || blocks_needed > in.max_blocks_per_seq) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ModelInput: kv_lens[", s, "] = ", kv_len, " must be in [1, max_blocks_per_seq * ",
        "block_size = ", int64_t{in.max_blocks_per_seq} * options_.block_size, "]"));
  }
  const BlockId* table = in.block_tables.data() + s * in.max_blocks_per_seq;
  for (int64_t b = 0; b < blocks_needed; ++b) {
    if (table[b] < 0 || table[b] >= options_.num_blocks) {
      return absl::InvalidArgumentError(absl::StrCat("ModelInput: block table of sequence ", s,
                                                     " entry ", b, " = ", table[b],
                                                     " is outside [0, ", options_.num_blocks, ")"));
    }
  }
  for (int32_t t = begin; t < end; ++t) {
    const int32_t pos = in.positions[static_cast<size_t>(t)];
    if (pos < 0 || pos >= kv_len) {
      return absl::InvalidArgumentError(absl::StrCat("ModelInput: positions[", t, "] = ", pos,
                                                     " must be in [0, kv_lens[", s, "] = ", kv_len,
                                                     ")"));
    }
    const int64_t slot = in.slot_mapping[static_cast<size_t>(t)];
    const int64_t expected =
        int64_t{table[pos / options_.block_size]} * options_.block_size + pos % options_.block_size;
    if (slot != -1 && slot != expected) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ModelInput: slot_mapping[", t, "] = ", slot, " disagrees with the block table of ",
          "sequence ", s, ", which puts position ", pos, " at slot ", expected));
    }
  }
  return absl::OkStatus();
}

namespace {

// ForwardOptions::logit_edits: rows strictly increasing in [0, num_logits), each row's tokens
// strictly increasing in [0, vocab), positive finite repetition penalty, finite penalties.
absl::Status ValidateLogitEdits(absl::Span<const RowLogitEdits> edits, int32_t num_logits,
                                int32_t vocab) {
  int32_t previous_row = -1;
  for (size_t i = 0; i < edits.size(); ++i) {
    const RowLogitEdits& e = edits[i];
    if (e.row <= previous_row || e.row >= num_logits) {
      return absl::InvalidArgumentError(
          absl::StrCat("ForwardOptions: logit_edits[", i, "].row = ", e.row, " must be in [0, ",
                       num_logits, ") and after the previous entry's"));
    }
    previous_row = e.row;
    if (!(e.repetition_penalty > 0.0f) || !std::isfinite(e.repetition_penalty) ||
        !std::isfinite(e.frequency_penalty) || !std::isfinite(e.presence_penalty)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ForwardOptions: logit_edits[", i,
          "] needs a finite repetition penalty > 0 and finite frequency and presence penalties"));
    }
    TokenId previous_token = -1;
    for (const LogitEdit& edit : e.edits) {
      if (edit.token <= previous_token || edit.token >= vocab || !std::isfinite(edit.bias)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "ForwardOptions: logit_edits[", i, "] has token ", edit.token,
            ": tokens must increase, stay in [0, ", vocab, ") and carry a finite bias"));
      }
      previous_token = edit.token;
    }
  }
  return absl::OkStatus();
}

// ForwardOptions::key_rows: strictly increasing input rows, each with a slot (written).
absl::Status ValidateKeyRows(absl::Span<const int32_t> key_rows,
                             absl::Span<const int64_t> slot_mapping) {
  const auto num_tokens = static_cast<int64_t>(slot_mapping.size());
  for (size_t i = 0; i < key_rows.size(); ++i) {
    const int32_t row = key_rows[i];
    if (row < 0 || row >= num_tokens || (i > 0 && row <= key_rows[i - 1])) {
      return absl::InvalidArgumentError(absl::StrCat("ForwardOptions: key_rows[", i, "] = ", row,
                                                     " is not a strictly increasing row in [0, ",
                                                     num_tokens, ")"));
    }
    if (slot_mapping[static_cast<size_t>(row)] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("ForwardOptions: key_rows[", i, "] = ", row,
                                                     " has no slot: its key is not written"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ModelRunner::ValidateOutputs(const ModelInput& in,
                                          const ForwardOptions& options) const {
  const auto num_tokens = static_cast<int64_t>(in.token_ids.size());
  for (size_t i = 0; i < in.logits_indices.size(); ++i) {
    if (in.logits_indices[i] < 0 || in.logits_indices[i] >= num_tokens) {
      return absl::InvalidArgumentError(absl::StrCat("ModelInput: logits_indices[", i,
                                                     "] = ", in.logits_indices[i],
                                                     " is outside [0, ", num_tokens, ")"));
    }
  }
  if (!options.sampling.empty() && options.sampling.size() != in.logits_indices.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ForwardOptions: sampling has ", options.sampling.size(),
                     " entries, expected one per logits index (", in.logits_indices.size(), ")"));
  }
  for (size_t i = 0; i < options.sampling.size(); ++i) {
    const SamplingParams& p = options.sampling[i];
    if (!SamplingParamsValid(p)) {
      return absl::InvalidArgumentError(
          absl::StrCat("ForwardOptions: sampling[", i,
                       "] needs a finite temperature, top_p in (0, 1], top_k >= 0 and min_p in "
                       "[0, 1]"));
    }
  }
  const auto num_logits = static_cast<int32_t>(in.logits_indices.size());
  for (size_t i = 0; i < options.copy_rows.size(); ++i) {
    if (options.copy_rows[i] < 0 || options.copy_rows[i] >= num_logits) {
      return absl::InvalidArgumentError(
          absl::StrCat("ForwardOptions: copy_rows[", i, "] = ", options.copy_rows[i],
                       " is outside [0, ", num_logits, ") (the logits rows)"));
    }
  }
  PAGEDKV_RETURN_IF_ERROR(ValidateKeyRows(options.key_rows, in.slot_mapping));
  return ValidateLogitEdits(options.logit_edits, num_logits, config().vocab_size);
}

}  // namespace pagedkv
