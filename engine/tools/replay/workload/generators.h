// Copyright 2026 The pagedkv Authors.
//
// Built-in workload generators for `pagedkv replay`: seeded, parameterised, deterministic (the
// same options give the same workload on every platform: they use std::mt19937_64 and their own
// samplers, not implementation-defined std distributions).
//
//  - system-prompt: every request is one of a few shared system prompts, picked with Zipf
//    popularity, followed by a unique user message.
//  - conversation: multi-turn chats; turn k's prompt is turn k-1's prompt, its answer, and a new
//    user message, so each turn extends the previous one.
//  - rag: a shared instruction, then 1..k documents drawn with Zipf popularity in random order
//    (so a document appears at many positions; each is marked as a ChunkSpan), then a question.
//  - mixed: the three above merged by arrival time (the default workload of `pagedkv replay`).
//
// Example:
//   Workload w = GenerateConversationWorkload({.num_conversations = 100, .seed = 7});
//   PAGEDKV_ASSIGN_OR_RETURN(Workload m, MakeBuiltinWorkload("mixed", {.seed = 1}));
#ifndef PAGEDKV_ENGINE_TOOLS_REPLAY_WORKLOAD_GENERATORS_H_
#define PAGEDKV_ENGINE_TOOLS_REPLAY_WORKLOAD_GENERATORS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tools/replay/workload/workload.h"
#include "pagedkv/export.h"

namespace pagedkv::replay {

// Inclusive integer range [min, max] sampled uniformly.
struct PAGEDKV_EXPORT TokenRange {
  int32_t min = 1;  // smallest value, > 0
  int32_t max = 1;  // largest value, >= min
};

struct PAGEDKV_EXPORT SystemPromptOptions {
  int32_t num_requests = 1500;             // requests generated
  int32_t num_system_prompts = 40;         // distinct shared system prompts
  double zipf_alpha = 1.0;                 // popularity of prompt k is 1 / (k+1)^alpha
  TokenRange system_tokens = {256, 2048};  // system prompt length
  TokenRange user_tokens = {16, 384};      // unique user message length
  TokenRange output_tokens = {16, 256};    // tokens generated per request
  double requests_per_s = 20;              // Poisson arrival rate
  uint64_t seed = 1;                       // random seed
  bool pin_system_prompts = false;         // system prompts at kPinnedSystemPromptPriority
};

struct PAGEDKV_EXPORT ConversationOptions {
  int32_t num_conversations = 250;         // conversations generated
  TokenRange turns = {1, 8};               // turns per conversation
  int32_t num_system_prompts = 6;          // system prompts shared across conversations
  TokenRange system_tokens = {128, 1024};  // system prompt length
  TokenRange user_tokens = {16, 384};      // each user message
  TokenRange output_tokens = {32, 512};    // each answer (it becomes part of the next turn)
  double conversations_per_s = 4;          // Poisson rate of new conversations
  double mean_think_ms = 8000;             // mean gap between turns (exponential)
  uint64_t seed = 2;                       // random seed
  bool pin_system_prompts = false;         // system prompts at kPinnedSystemPromptPriority
};

struct PAGEDKV_EXPORT RagOptions {
  int32_t num_requests = 800;                 // requests generated
  int32_t num_documents = 80;                 // distinct documents in the corpus
  double zipf_alpha = 0.9;                    // popularity of document k is 1 / (k+1)^alpha
  TokenRange document_tokens = {256, 1536};   // document length
  TokenRange documents_per_request = {1, 4};  // documents retrieved per request
  int32_t instruction_tokens = 96;            // shared instruction before the documents
  TokenRange question_tokens = {16, 128};     // unique question after the documents
  TokenRange output_tokens = {16, 256};       // tokens generated per request
  double requests_per_s = 10;                 // Poisson arrival rate
  uint64_t seed = 3;                          // random seed
};

// Size and seed of a built-in workload chosen by name.
struct PAGEDKV_EXPORT BuiltinWorkloadOptions {
  int32_t num_requests = 0;         // approximate number of requests; 0 = the generator's default
  uint64_t seed = 1;                // random seed (each generator derives its own from it)
  bool pin_system_prompts = false;  // system-prompt and conversation: pin the system prompts
};

// The eviction priority of a pinned system prompt (ReplayRequest::priority_spans).
inline constexpr int32_t kPinnedSystemPromptPriority = 90;

PAGEDKV_EXPORT Workload GenerateSystemPromptWorkload(const SystemPromptOptions& options);
PAGEDKV_EXPORT Workload GenerateConversationWorkload(const ConversationOptions& options);
PAGEDKV_EXPORT Workload GenerateRagWorkload(const RagOptions& options);
// The three above (with seeds derived from `seed`), merged in arrival order.
PAGEDKV_EXPORT Workload GenerateMixedWorkload(const SystemPromptOptions& system_prompt,
                                              const ConversationOptions& conversation,
                                              const RagOptions& rag);

// Names accepted by MakeBuiltinWorkload.
PAGEDKV_EXPORT std::vector<std::string> BuiltinWorkloadNames();

// The workload `name` ("system-prompt", "conversation", "rag", "mixed"). InvalidArgument for an
// unknown name or bad options (e.g. num_requests < 0).
PAGEDKV_EXPORT absl::StatusOr<Workload> MakeBuiltinWorkload(std::string_view name,
                                                            const BuiltinWorkloadOptions& options);

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_TOOLS_REPLAY_WORKLOAD_GENERATORS_H_
