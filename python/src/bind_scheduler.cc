// Copyright 2026 The pagedkv Authors.
//
// Bindings of the continuous-batching Scheduler. schedule() returns a ScheduledBatch that owns
// its arrays; token ids, positions, slot mapping, query offsets and the CSR block tables are
// read-only numpy views into it (no copy) that keep the batch alive.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common.h"
#include "kv_cache_manager_binding.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/runtime/scheduler.h"

namespace pagedkv::python {
namespace {

using py::arg;

// A Scheduler over a Python KvCacheManager, which it keeps alive.
struct PyScheduler {
  py::object cache_owner;                // the PyKvCacheManager; released after the scheduler
  std::unique_ptr<Scheduler> scheduler;  // never null once constructed

  Scheduler& get() {
    cache_owner.cast<PyKvCacheManager&>().hub.CheckNotInListener();
    return *scheduler;
  }
};

absl::StatusOr<SchedulingPolicy> ParsePolicy(const std::string& name) {
  if (name == "fcfs") return SchedulingPolicy::kFcfs;
  if (name == "priority") return SchedulingPolicy::kPriority;
  return absl::InvalidArgumentError("unknown scheduling policy \"" + name +
                                    "\"; expected \"fcfs\" or \"priority\"");
}

// Sampled tokens from a dict {request_id: token} or an iterable of (request_id, token) pairs.
// InvalidArgument for anything else.
std::vector<SampledToken> SampledArgument(py::handle sampled) {
  std::vector<SampledToken> out;
  try {
    if (py::isinstance<py::dict>(sampled)) {
      for (auto [k, v] : sampled.cast<py::dict>()) {
        out.push_back({.request_id = k.cast<RequestId>(), .token = v.cast<TokenId>()});
      }
      return out;
    }
    for (py::handle item : sampled) {
      const py::tuple t = item.cast<py::tuple>();
      if (t.size() != 2 && t.size() != 3) throw py::cast_error("need 2 or 3 items");
      out.push_back({.request_id = t[0].cast<RequestId>(),
                     .token = t[1].cast<TokenId>(),
                     .num_accepted_draft_tokens = t.size() == 3 ? t[2].cast<int32_t>() : 0});
    }
  } catch (const py::cast_error&) {
    ThrowInvalidArgument(
        "update_from_output: pass a dict {request_id: token}, or (request_id, token) pairs or "
        "(request_id, token, num_accepted_draft_tokens) triples of non-negative ints");
  }
  return out;
}

void BindBatchParts(py::module_& m) {
  py::class_<ScheduledSequence> s(m, "ScheduledSequence", "One sequence of a ScheduledBatch.");
  s.def_readonly("request_id", &ScheduledSequence::request_id, "The request this sequence serves.")
      .def_readonly("query_start", &ScheduledSequence::query_start,
                    "Index of the sequence's first token in the batch's flat arrays.")
      .def_readonly("num_scheduled_tokens", &ScheduledSequence::num_scheduled_tokens,
                    "Tokens of this sequence in the batch.")
      .def_readonly("num_computed_tokens", &ScheduledSequence::num_computed_tokens,
                    "Tokens already in the KV cache before this step.")
      .def_readonly("block_table_start", &ScheduledSequence::block_table_start,
                    "Index of the sequence's first block in the batch's block_table_ids.")
      .def_readonly("num_blocks", &ScheduledSequence::num_blocks,
                    "Blocks in the sequence's block table.")
      .def_readonly("samples", &ScheduledSequence::samples,
                    "True when the step samples a token for this sequence.")
      .def_readonly("newly_admitted", &ScheduledSequence::newly_admitted,
                    "True when the request was admitted in this step.")
      .def_readonly("num_prefix_hit_tokens", &ScheduledSequence::num_prefix_hit_tokens,
                    "Tokens served from the prefix cache at this admission.")
      .def_readonly("num_shifted_hit_tokens", &ScheduledSequence::num_shifted_hit_tokens,
                    "Tokens reused from a chunk at another position in this step.")
      .def_readonly("num_blend_tokens", &ScheduledSequence::num_blend_tokens,
                    "Of those, tokens scheduled too for selective recompute (CacheBlend).")
      .def_readonly("num_draft_tokens", &ScheduledSequence::num_draft_tokens,
                    "Draft tokens scheduled after the new ones (speculative decoding).")
      .def_readonly("num_copied_tokens", &ScheduledSequence::num_copied_tokens,
                    "Prompt tokens copied from the prompt source's blocks at this admission.")
      .def_property_readonly("seq_len", &ScheduledSequence::seq_len,
                             "num_computed_tokens + num_scheduled_tokens.");
  AddDataclassMethods(
      s, {"request_id", "query_start", "num_scheduled_tokens", "num_computed_tokens",
          "block_table_start", "num_blocks", "samples", "newly_admitted", "num_prefix_hit_tokens",
          "num_shifted_hit_tokens", "num_blend_tokens", "num_draft_tokens", "num_copied_tokens"});

  py::class_<KvSlotMove> mv(m, "KvSlotMove", "KV to move (re-rotate) before the forward pass.");
  mv.def_readonly("src_slot", &KvSlotMove::src_slot, "Slot the KV is read from.")
      .def_readonly("dst_slot", &KvSlotMove::dst_slot, "Slot the KV is written to.")
      .def_readonly("old_position", &KvSlotMove::old_position,
                    "Position the keys were rotated for.")
      .def_readonly("new_position", &KvSlotMove::new_position, "Position to rotate them to.");
  AddDataclassMethods(mv, {"src_slot", "dst_slot", "old_position", "new_position"});

  py::class_<BlockCopy> bc(m, "BlockCopy", "A block's KV copied into another before the step.");
  bc.def_readonly("src", &BlockCopy::src, "Block copied from (the prompt source's).")
      .def_readonly("dst", &BlockCopy::dst, "Block copied into (the sample's own).");
  AddDataclassMethods(bc, {"src", "dst"});

  py::class_<SchedulerStepStats> st(m, "SchedulerStepStats", "Counters of one step.");
  std::vector<std::string> names;
#define PAGEDKV_FIELD(f, doc)                       \
  st.def_readonly(#f, &SchedulerStepStats::f, doc); \
  names.push_back(#f)
  PAGEDKV_FIELD(step, "0-based step index.");
  PAGEDKV_FIELD(num_scheduled_tokens, "Tokens in the batch.");
  PAGEDKV_FIELD(num_prefill_tokens, "Tokens of sequences not in plain decode.");
  PAGEDKV_FIELD(num_decode_tokens, "Tokens of sequences decoding their next token.");
  PAGEDKV_FIELD(num_scheduled_seqs, "Sequences in the batch.");
  PAGEDKV_FIELD(num_running, "Running requests after scheduling.");
  PAGEDKV_FIELD(num_waiting, "Waiting requests after scheduling.");
  PAGEDKV_FIELD(num_newly_admitted, "Requests admitted from the waiting queue this step.");
  PAGEDKV_FIELD(num_preempted, "Requests preempted this step.");
  PAGEDKV_FIELD(num_finished, "Requests finished or aborted since the previous step.");
  PAGEDKV_FIELD(num_prefix_hit_tokens, "Prefix-cache hits of the requests admitted this step.");
  PAGEDKV_FIELD(num_admitted_prompt_tokens, "All tokens of the requests admitted this step.");
  PAGEDKV_FIELD(num_shifted_hit_tokens, "Tokens reused from chunks at another position.");
  PAGEDKV_FIELD(num_blend_tokens,
                "Of those, tokens scheduled for CacheBlend recompute (in the batch).");
  PAGEDKV_FIELD(num_draft_tokens, "Draft tokens scheduled for verification.");
  PAGEDKV_FIELD(num_copied_tokens, "Prompt tokens copied from prompt sources.");
  PAGEDKV_FIELD(num_used_blocks, "KV blocks held by running requests after scheduling.");
  PAGEDKV_FIELD(num_total_blocks, "KV pool size in blocks.");
#undef PAGEDKV_FIELD
  AddDataclassMethods(st, names);
}

void BindBatch(py::module_& m) {
  py::class_<ScheduledBatch, std::shared_ptr<ScheduledBatch>> b(
      m, "ScheduledBatch",
      "One step's work, flat. The numpy arrays are read-only views into this batch (they keep "
      "it alive); a later schedule() returns a new batch and never changes this one.");
  auto view = [](auto member) {
    return [member](py::object self) {
      return ReadOnlyView(self.cast<ScheduledBatch&>().*member, self);
    };
  };
  b.def_property_readonly("token_ids", view(&ScheduledBatch::token_ids), "int32 [num_tokens]")
      .def_property_readonly("positions", view(&ScheduledBatch::positions), "int32 [num_tokens]")
      .def_property_readonly("slot_mapping", view(&ScheduledBatch::slot_mapping),
                             "int64 [num_tokens]: block_id * block_size + position % block_size")
      .def_property_readonly("query_start_loc", view(&ScheduledBatch::query_start_loc),
                             "int32 [num_sequences + 1]")
      .def_property_readonly("block_table_ids", view(&ScheduledBatch::block_table_ids),
                             "int32: every sequence's block table, concatenated (CSR)")
      .def_property_readonly("block_table_start", view(&ScheduledBatch::block_table_start),
                             "int32 [num_sequences + 1] offsets into block_table_ids")
      .def(
          "block_table",
          [](py::object self, int32_t i) {
            const ScheduledBatch& batch = self.cast<ScheduledBatch&>();
            if (i < 0 || i >= batch.num_sequences()) {
              throw py::index_error("sequence index " + std::to_string(i) + " out of range");
            }
            const int32_t begin = batch.block_table_start[i];
            const int32_t end = batch.block_table_start[i + 1];
            return ReadOnlyView(batch.block_table_ids.data() + begin,
                                static_cast<size_t>(end - begin), self);
          },
          arg("i"), "Sequence i's block table (a read-only view).")
      .def_readonly("sequences", &ScheduledBatch::sequences,
                    "The batch's sequences (ScheduledSequence).")
      .def_readonly("finished_request_ids", &ScheduledBatch::finished_request_ids,
                    "Requests that finished or were aborted since the previous batch.")
      .def_readonly("preempted_request_ids", &ScheduledBatch::preempted_request_ids,
                    "Requests preempted in this step (their blocks were freed).")
      .def_readonly("slot_moves", &ScheduledBatch::slot_moves,
                    "KV to move and re-rotate before the forward pass (KvSlotMove).")
      .def_readonly("group_slot_moves", &ScheduledBatch::group_slot_moves,
                    "Over G > 1 KV cache groups: group g's moves at [g - 1], in its own slots "
                    "(slot_moves is group 0's); empty over one group.")
      .def_readonly("block_copies", &ScheduledBatch::block_copies,
                    "Blocks to copy before the forward pass (BlockCopy): prompt sources.")
      .def_readonly("block_size", &ScheduledBatch::block_size, "Tokens per block.")
      .def_readonly("stats", &ScheduledBatch::stats, "The step's counters (SchedulerStepStats).")
      .def_property_readonly("num_sequences", &ScheduledBatch::num_sequences,
                             "Sequences in the batch.")
      .def_property_readonly("num_tokens", &ScheduledBatch::num_tokens, "Tokens in the batch.")
      .def_property_readonly("empty", &ScheduledBatch::empty, "True when nothing was scheduled.")
      .def("__len__", &ScheduledBatch::num_tokens)
      .def("__repr__", [](const ScheduledBatch& batch) {
        return "ScheduledBatch(step=" + std::to_string(batch.stats.step) +
               ", num_sequences=" + std::to_string(batch.num_sequences()) +
               ", num_tokens=" + std::to_string(batch.num_tokens()) + ")";
      });
}

void BindResults(py::module_& m) {
  py::class_<RequestOutput> out(m, "RequestOutput", "What update_from_output did with a token.");
  out.def_readonly("request_id", &RequestOutput::request_id, "The request the token was for.")
      .def_readonly("token", &RequestOutput::token, "The token appended last.")
      .def_readonly("num_output_tokens", &RequestOutput::num_output_tokens,
                    "Tokens the request has generated so far.")
      .def_property_readonly(
          "finish_reason", [](const RequestOutput& o) { return FinishReasonName(o.finish_reason); },
          "\"none\" (running), \"stop\", \"length\" or \"aborted\".")
      .def_readonly("output_tokens", &RequestOutput::output_tokens,
                    "Every generated token, when the request finished (else empty).")
      .def_readonly("new_tokens", &RequestOutput::new_tokens,
                    "Tokens this update appended: accepted drafts, then `token`.")
      .def_property_readonly("finished", &RequestOutput::finished,
                             "True when the request finished with this update.");
  AddDataclassMethods(out, {"request_id", "token", "num_output_tokens", "finish_reason",
                            "output_tokens", "new_tokens"});

  py::class_<RequestInfo> info(m, "RequestInfo", "A snapshot of one unfinished request.");
  info.def_readonly("id", &RequestInfo::id, "The request id.")
      .def_property_readonly(
          "status",
          [](const RequestInfo& i) {
            return i.status == RequestStatus::kWaiting ? "waiting" : "running";
          },
          "\"waiting\" or \"running\".")
      .def_readonly("num_prompt_tokens", &RequestInfo::num_prompt_tokens, "Tokens of the prompt.")
      .def_readonly("num_output_tokens", &RequestInfo::num_output_tokens,
                    "Tokens generated so far.")
      .def_readonly("num_computed_tokens", &RequestInfo::num_computed_tokens,
                    "Tokens whose KV is computed.")
      .def_readonly("num_prefix_hit_tokens", &RequestInfo::num_prefix_hit_tokens,
                    "Tokens served from the prefix cache at its last admission.")
      .def_readonly("num_preemptions", &RequestInfo::num_preemptions,
                    "Times the request was preempted.");
  AddDataclassMethods(info, {"id", "status", "num_prompt_tokens", "num_output_tokens",
                             "num_computed_tokens", "num_prefix_hit_tokens", "num_preemptions"});

  py::class_<SchedulerStats> st(m, "SchedulerStats", "Scheduler totals since construction.");
  st.def_readonly("num_steps", &SchedulerStats::num_steps, "Steps scheduled.")
      .def_readonly("num_scheduled_tokens", &SchedulerStats::num_scheduled_tokens,
                    "Tokens scheduled over all steps.")
      .def_readonly("num_preemptions", &SchedulerStats::num_preemptions, "Preemptions.")
      .def_readonly("num_finished", &SchedulerStats::num_finished,
                    "Requests finished (stop token or length).")
      .def_readonly("num_aborted", &SchedulerStats::num_aborted, "Requests aborted.")
      .def_readonly("num_admissions", &SchedulerStats::num_admissions,
                    "Admissions (re-admissions after preemption included).")
      .def_readonly("num_admitted_tokens", &SchedulerStats::num_admitted_tokens,
                    "Tokens of the admitted requests.")
      .def_readonly("num_prefix_hit_tokens", &SchedulerStats::num_prefix_hit_tokens,
                    "Of those, tokens served from the prefix cache.")
      .def_readonly("num_shifted_hit_tokens", &SchedulerStats::num_shifted_hit_tokens,
                    "Tokens reused from chunks at another position.")
      .def_readonly("num_draft_tokens", &SchedulerStats::num_draft_tokens,
                    "Draft tokens scheduled (speculative decoding).")
      .def_readonly("num_accepted_draft_tokens", &SchedulerStats::num_accepted_draft_tokens,
                    "Of those, accepted.")
      .def_readonly("num_copied_tokens", &SchedulerStats::num_copied_tokens,
                    "Prompt tokens copied from prompt sources.");
  AddDataclassMethods(st, {"num_steps", "num_scheduled_tokens", "num_preemptions", "num_finished",
                           "num_aborted", "num_admissions", "num_admitted_tokens",
                           "num_prefix_hit_tokens", "num_shifted_hit_tokens", "num_draft_tokens",
                           "num_accepted_draft_tokens", "num_copied_tokens"});
}

std::unique_ptr<PyScheduler> MakeScheduler(py::object cache, int32_t max_num_batched_tokens,
                                           int32_t max_num_seqs, bool enable_chunked_prefill,
                                           int32_t long_prefill_token_threshold,
                                           const std::string& policy, bool cache_aware,
                                           int32_t cache_aware_max_waiting, int32_t max_model_len,
                                           bool emit_block_tables) {
  SchedulerOptions o{.max_num_batched_tokens = max_num_batched_tokens,
                     .max_num_seqs = max_num_seqs,
                     .enable_chunked_prefill = enable_chunked_prefill,
                     .long_prefill_token_threshold = long_prefill_token_threshold,
                     .policy = Unwrap(ParsePolicy(policy)),
                     .cache_aware = cache_aware,
                     .cache_aware_max_waiting = cache_aware_max_waiting,
                     .max_model_len = max_model_len,
                     .emit_block_tables = emit_block_tables};
  auto out = std::make_unique<PyScheduler>();
  out->scheduler = Unwrap(Scheduler::Create(o, cache.cast<PyKvCacheManager&>().get()));
  out->cache_owner = std::move(cache);
  return out;
}

void AddRequest(PyScheduler& self, RequestId id, std::vector<TokenId> prompt,
                int32_t max_new_tokens, int32_t priority, double arrival_time,
                std::string cache_salt, uint64_t adapter_id, std::optional<py::list> multimodal,
                std::optional<TokenId> eos_token, std::vector<TokenId> stop_tokens,
                std::optional<py::list> chunks, RequestId prompt_source) {
  SchedulerRequest r{.id = id,
                     .prompt = std::move(prompt),
                     .max_new_tokens = max_new_tokens,
                     .priority = priority,
                     .arrival_time = arrival_time,
                     .cache_salt = std::move(cache_salt),
                     .adapter_id = adapter_id,
                     .eos_token = eos_token,
                     .stop_tokens = std::move(stop_tokens)};
  if (multimodal.has_value()) {
    for (py::handle h : *multimodal) r.multimodal.push_back(h.cast<MultimodalInput>());
  }
  if (chunks.has_value()) {
    for (py::handle h : *chunks) {
      auto [offset, length] = h.cast<std::pair<int32_t, int32_t>>();
      r.chunks.push_back({.offset = offset, .length = length});
    }
  }
  r.prompt_source = prompt_source;
  CheckStatus(self.get().AddRequest(std::move(r)));
}

void BindSchedulerClass(py::module_& m) {
  py::class_<PyScheduler> c(m, "Scheduler",
                            "Continuous-batching scheduler over a KvCacheManager (vLLM v1 "
                            "style). Not thread-safe.");
  c.def(py::init(&MakeScheduler), arg("cache"), py::kw_only(), arg("max_num_batched_tokens") = 2048,
        arg("max_num_seqs") = 256, arg("enable_chunked_prefill") = true,
        arg("long_prefill_token_threshold") = 0, arg("policy") = "fcfs", arg("cache_aware") = false,
        arg("cache_aware_max_waiting") = 256, arg("max_model_len") = 0,
        arg("emit_block_tables") = true)
      .def("add_request", &AddRequest, arg("id"), arg("prompt"), py::kw_only(),
           arg("max_new_tokens") = 16, arg("priority") = 0, arg("arrival_time") = 0.0,
           arg("cache_salt") = "", arg("adapter_id") = 0, arg("multimodal") = py::none(),
           arg("eos_token") = py::none(), arg("stop_tokens") = std::vector<TokenId>{},
           arg("chunks") = py::none(), arg("prompt_source") = 0,
           "Queues a request; chunks are (offset, length) pairs of reusable prompt spans; "
           "prompt_source names another sample of the same prompt whose KV it takes.")
      .def(
          "schedule",
          [](PyScheduler& self) {
            return std::make_shared<ScheduledBatch>(Unwrap(self.get().Schedule()));
          },
          "Plans the next step; returns a new ScheduledBatch.")
      .def(
          "update_from_output",
          [](PyScheduler& self, py::handle sampled) {
            std::vector<SampledToken> tokens = SampledArgument(sampled);
            return Unwrap(self.get().UpdateFromOutput(tokens));
          },
          arg("sampled"),
          "Feeds back one token per sampling sequence: a dict {request_id: token}, or "
          "(request_id, token) pairs or (request_id, token, num_accepted_draft_tokens) triples. "
          "Returns a RequestOutput per token.")
      .def(
          "set_draft_tokens",
          [](PyScheduler& self, RequestId id, std::vector<TokenId> drafts) {
            CheckStatus(self.get().SetDraftTokens(id, drafts));
          },
          arg("request_id"), arg("draft_tokens"),
          "Proposes draft tokens for a running request in decode: its next step schedules 1 + k "
          "tokens (speculative decoding).")
      .def(
          "abort_request",
          [](PyScheduler& self, RequestId id) { CheckStatus(self.get().AbortRequest(id)); },
          arg("request_id"),
          "Ends a waiting or running request; its blocks are freed and the next batch lists it in "
          "finished_request_ids.")
      .def(
          "has_unfinished_requests",
          [](PyScheduler& self) { return self.get().HasUnfinishedRequests(); },
          "True while some request is waiting or running.")
      .def_property_readonly(
          "num_waiting", [](PyScheduler& self) { return self.get().num_waiting(); },
          "Requests waiting for admission.")
      .def_property_readonly(
          "num_running", [](PyScheduler& self) { return self.get().num_running(); },
          "Requests admitted and not finished.")
      .def(
          "get_request_info",
          [](PyScheduler& self, RequestId id) { return Unwrap(self.get().GetRequestInfo(id)); },
          arg("request_id"), "A RequestInfo snapshot of the request; NotFoundError when unknown.")
      .def_property_readonly(
          "stats", [](PyScheduler& self) { return self.get().stats(); },
          "Totals over all steps (a SchedulerStats snapshot).")
      .def_property_readonly(
          "cache", [](PyScheduler& self) { return self.cache_owner; },
          "The KvCacheManager the scheduler allocates from.")
      .def("__repr__", [](PyScheduler& self) {
        return "Scheduler(num_waiting=" + std::to_string(self.get().num_waiting()) +
               ", num_running=" + std::to_string(self.get().num_running()) + ")";
      });
}

}  // namespace

void BindScheduler(py::module_& m) {
  BindBatchParts(m);
  BindBatch(m);
  BindResults(m);
  BindSchedulerClass(m);
}

}  // namespace pagedkv::python
