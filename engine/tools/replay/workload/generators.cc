// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/workload/generators.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace pagedkv::replay {
namespace {

__extension__ using U128 = unsigned __int128;

// Content ids: the top byte names the kind of content so generators never share ids by accident.
enum ContentKind : uint64_t {
  kSystemPrompt = 1,
  kUserMessage = 2,
  kConvSystemPrompt = 3,
  kConvUserMessage = 4,
  kConvAnswer = 5,
  kRagInstruction = 6,
  kRagDocument = 7,
  kRagQuestion = 8,
};

uint64_t ContentId(ContentKind kind, uint64_t n) { return (uint64_t{kind} << 56) | n; }

// Portable samplers over std::mt19937_64 (whose output sequence the standard fixes).
class Sampler {
 public:
  explicit Sampler(uint64_t seed) : rng_(seed) {}

  // Uniform in [lo, hi].
  int64_t Uniform(int64_t lo, int64_t hi) {
    const auto range = static_cast<U128>(hi - lo + 1);
    return lo + static_cast<int64_t>((static_cast<U128>(rng_()) * range) >> 64);
  }
  int32_t Uniform(TokenRange r) { return static_cast<int32_t>(Uniform(r.min, r.max)); }
  // Uniform in [0, 1).
  double Unit() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }
  // Exponential with the given mean.
  double Exponential(double mean) { return -mean * std::log1p(-Unit()); }

 private:
  std::mt19937_64 rng_;
};

// Zipf over [0, n): P(k) proportional to 1 / (k+1)^alpha, by inverse CDF.
class Zipf {
 public:
  Zipf(int32_t n, double alpha) : cdf_(static_cast<size_t>(std::max(n, 1))) {
    double sum = 0;
    for (size_t k = 0; k < cdf_.size(); ++k) {
      sum += 1.0 / std::pow(static_cast<double>(k + 1), alpha);
      cdf_[k] = sum;
    }
    for (double& c : cdf_) c /= sum;
  }
  int32_t Sample(Sampler& s) const {
    const double u = s.Unit();
    const auto it = std::upper_bound(cdf_.begin(), cdf_.end(), u);
    return static_cast<int32_t>(std::min<size_t>(it - cdf_.begin(), cdf_.size() - 1));
  }

 private:
  std::vector<double> cdf_;
};

void Append(ReplayRequest& r, uint64_t content_id, int32_t length) {
  r.segments.push_back({.content_id = content_id, .length = length});
  r.input_length += length;
}

// Sorts by arrival, keeping generation order among equal arrivals.
void SortByArrival(std::vector<ReplayRequest>& requests) {
  std::stable_sort(
      requests.begin(), requests.end(),
      [](const ReplayRequest& a, const ReplayRequest& b) { return a.arrival_ms < b.arrival_ms; });
}

// Marks the request's prompt so far (its system prompt) as pinned.
void PinPrefix(ReplayRequest& r) {
  r.priority_spans.push_back({.begin_token = 0,
                              .end_token = r.input_length,
                              .priority = {.priority = kPinnedSystemPromptPriority}});
}

}  // namespace

Workload GenerateSystemPromptWorkload(const SystemPromptOptions& o) {
  Sampler s(o.seed);
  Zipf zipf(o.num_system_prompts, o.zipf_alpha);
  std::vector<int32_t> prompt_len(static_cast<size_t>(std::max(o.num_system_prompts, 1)));
  for (int32_t& len : prompt_len) len = s.Uniform(o.system_tokens);
  Workload w;
  w.name = "system-prompt";
  double t = 0;
  for (int32_t i = 0; i < o.num_requests; ++i) {
    t += s.Exponential(1000.0 / o.requests_per_s);
    ReplayRequest r;
    r.arrival_ms = t;
    const int32_t p = zipf.Sample(s);
    Append(r, ContentId(kSystemPrompt, static_cast<uint64_t>(p)), prompt_len[p]);
    if (o.pin_system_prompts) PinPrefix(r);
    Append(r, ContentId(kUserMessage, static_cast<uint64_t>(i)), s.Uniform(o.user_tokens));
    r.output_length = s.Uniform(o.output_tokens);
    w.requests.push_back(std::move(r));
  }
  return w;
}

Workload GenerateConversationWorkload(const ConversationOptions& o) {
  Sampler s(o.seed);
  std::vector<int32_t> prompt_len(static_cast<size_t>(std::max(o.num_system_prompts, 1)));
  for (int32_t& len : prompt_len) len = s.Uniform(o.system_tokens);
  Workload w;
  w.name = "conversation";
  uint64_t next_message = 0;
  double start = 0;
  for (int32_t c = 0; c < o.num_conversations; ++c) {
    start += s.Exponential(1000.0 / o.conversations_per_s);
    const int32_t turns = s.Uniform(o.turns);
    ReplayRequest turn;
    turn.arrival_ms = start;
    const auto sys =
        static_cast<uint64_t>(s.Uniform(0, static_cast<int64_t>(prompt_len.size()) - 1));
    Append(turn, ContentId(kConvSystemPrompt, sys), prompt_len[sys]);
    if (o.pin_system_prompts) PinPrefix(turn);
    for (int32_t k = 0; k < turns; ++k) {
      Append(turn, ContentId(kConvUserMessage, next_message++), s.Uniform(o.user_tokens));
      turn.output_length = s.Uniform(o.output_tokens);
      w.requests.push_back(turn);
      // The next turn: this prompt, this answer, then (in the next iteration) a new message.
      Append(turn, ContentId(kConvAnswer, next_message++),
             static_cast<int32_t>(turn.output_length));
      turn.arrival_ms += s.Exponential(o.mean_think_ms);
    }
  }
  SortByArrival(w.requests);
  return w;
}

Workload GenerateRagWorkload(const RagOptions& o) {
  Sampler s(o.seed);
  Zipf zipf(o.num_documents, o.zipf_alpha);
  std::vector<int32_t> doc_len(static_cast<size_t>(std::max(o.num_documents, 1)));
  for (int32_t& len : doc_len) len = s.Uniform(o.document_tokens);
  Workload w;
  w.name = "rag";
  double t = 0;
  std::vector<int32_t> docs;
  for (int32_t i = 0; i < o.num_requests; ++i) {
    t += s.Exponential(1000.0 / o.requests_per_s);
    ReplayRequest r;
    r.arrival_ms = t;
    if (o.instruction_tokens > 0) Append(r, ContentId(kRagInstruction, 0), o.instruction_tokens);
    const int32_t want = std::min(s.Uniform(o.documents_per_request), o.num_documents);
    docs.clear();
    // Distinct documents in retrieval order (the order places each at a varying position).
    for (int attempt = 0; static_cast<int32_t>(docs.size()) < want && attempt < 64 * want;
         ++attempt) {
      const int32_t d = zipf.Sample(s);
      if (std::find(docs.begin(), docs.end(), d) == docs.end()) docs.push_back(d);
    }
    for (int32_t d : docs) {
      const uint64_t id = ContentId(kRagDocument, static_cast<uint64_t>(d));
      r.chunks.push_back({.content_id = id, .token_offset = r.input_length, .length = doc_len[d]});
      Append(r, id, doc_len[d]);
    }
    Append(r, ContentId(kRagQuestion, static_cast<uint64_t>(i)), s.Uniform(o.question_tokens));
    r.output_length = s.Uniform(o.output_tokens);
    w.requests.push_back(std::move(r));
  }
  return w;
}

Workload GenerateMixedWorkload(const SystemPromptOptions& system_prompt,
                               const ConversationOptions& conversation, const RagOptions& rag) {
  Workload w;
  w.name = "mixed";
  for (Workload part : {GenerateSystemPromptWorkload(system_prompt),
                        GenerateConversationWorkload(conversation), GenerateRagWorkload(rag)}) {
    for (ReplayRequest& r : part.requests) w.requests.push_back(std::move(r));
  }
  SortByArrival(w.requests);
  return w;
}

std::vector<std::string> BuiltinWorkloadNames() {
  return {"mixed", "system-prompt", "conversation", "rag"};
}

absl::StatusOr<Workload> MakeBuiltinWorkload(std::string_view name,
                                             const BuiltinWorkloadOptions& options) {
  if (options.num_requests < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--requests must be >= 0 (got %d)", options.num_requests));
  }
  const uint64_t seed = options.seed;
  SystemPromptOptions sp{.seed = seed * 3 + 1, .pin_system_prompts = options.pin_system_prompts};
  ConversationOptions conv{.seed = seed * 3 + 2, .pin_system_prompts = options.pin_system_prompts};
  RagOptions rag{.seed = seed * 3 + 3};
  // Mean turns per conversation: the midpoint of the range.
  const double turns = (conv.turns.min + conv.turns.max) / 2.0;
  const int32_t n = options.num_requests;
  if (name == "system-prompt") {
    if (n > 0) sp.num_requests = n;
    return GenerateSystemPromptWorkload(sp);
  }
  if (name == "conversation") {
    if (n > 0) conv.num_conversations = std::max(1, static_cast<int32_t>(n / turns));
    return GenerateConversationWorkload(conv);
  }
  if (name == "rag") {
    if (n > 0) rag.num_requests = n;
    return GenerateRagWorkload(rag);
  }
  if (name == "mixed") {
    if (n > 0) {
      sp.num_requests = std::max(1, n / 3);
      conv.num_conversations = std::max(1, static_cast<int32_t>(n / 3 / turns));
      rag.num_requests = std::max(1, n - 2 * (n / 3));
    }
    return GenerateMixedWorkload(sp, conv, rag);
  }
  return absl::InvalidArgumentError(absl::StrFormat("unknown workload \"%s\"; expected one of: %s",
                                                    name,
                                                    absl::StrJoin(BuiltinWorkloadNames(), ", ")));
}

}  // namespace pagedkv::replay
