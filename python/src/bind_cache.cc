// Copyright 2026 The pagedkv Authors.
//
// Bindings of the request-level prefix cache: KvCacheManager, CacheRequest, ComputedBlocks,
// MultimodalInput and CacheStats.
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common.h"
#include "events.h"
#include "kv_cache_manager_binding.h"
#include "pagedkv/cache/cache_request.h"
#include "pagedkv/cache/cache_stats.h"
#include "pagedkv/cache/kv_cache_manager.h"

namespace pagedkv::python {
namespace {

using py::arg;

std::vector<MultimodalInput> MultimodalArgument(const std::optional<py::list>& inputs) {
  std::vector<MultimodalInput> out;
  if (inputs.has_value()) {
    for (py::handle h : *inputs) out.push_back(h.cast<MultimodalInput>());
  }
  return out;
}

std::unique_ptr<PyKvCacheManager> MakeManager(
    int32_t num_blocks, int32_t block_size, bool enable_prefix_caching, bool verify_tokens,
    py::object eviction_policy, int32_t vocab_size, std::string model_fingerprint,
    bool record_events, bool collect_block_metrics, bool enable_priorities,
    double max_high_priority_fraction, std::vector<KvCacheGroupSpec> groups,
    bool collect_event_batches, std::optional<int32_t> data_parallel_rank) {
  KvCacheManagerOptions options{.num_blocks = num_blocks,
                                .block_size = block_size,
                                .enable_prefix_caching = enable_prefix_caching,
                                .verify_tokens = verify_tokens,
                                .vocab_size = vocab_size,
                                .model_fingerprint = std::move(model_fingerprint),
                                .enable_priorities = enable_priorities,
                                .max_high_priority_fraction = max_high_priority_fraction,
                                .collect_block_metrics = collect_block_metrics,
                                .groups = std::move(groups)};
  options.collect_event_batches = collect_event_batches;
  options.data_parallel_rank = data_parallel_rank;
  std::unique_ptr<EvictionPolicy> policy =
      PolicyArgument(eviction_policy, &options.eviction_policy);
  auto out = std::make_unique<PyKvCacheManager>();
  out->manager = Unwrap(KvCacheManager::Create(std::move(options), std::move(policy)));
  out->hub.Attach(*out->manager, record_events);
  return out;
}

void BindCacheRequest(py::module_& m) {
  py::class_<MultimodalInput> mm(m, "MultimodalInput",
                                 "A multimodal input over `length` placeholder tokens from "
                                 "`offset`; every block it overlaps hashes `content_hash`.");
  mm.def(py::init([](int64_t offset, int64_t length, BlockHash content_hash) {
           return MultimodalInput{.offset = offset, .length = length, .content_hash = content_hash};
         }),
         arg("offset"), arg("length"), arg("content_hash"))
      .def_readonly("offset", &MultimodalInput::offset,
                    "First prompt token the input covers (>= 0).")
      .def_readonly("length", &MultimodalInput::length, "Placeholder tokens it covers (> 0).")
      .def_readonly("content_hash", &MultimodalInput::content_hash,
                    "16-byte hash of the input's content (e.g. the image bytes), mixed into every "
                    "block it overlaps.");
  AddDataclassMethods(mm, {"offset", "length", "content_hash"});

  py::class_<CacheRequest> req(m, "CacheRequest",
                               "The cache-side state of one request: its tokens and the chained "
                               "hashes of its full blocks (made by KvCacheManager.new_request).");
  req.def(py::init([](RequestId id, std::vector<TokenId> prompt, int32_t block_size,
                      std::string cache_salt, std::string model_fingerprint, uint64_t adapter_id,
                      std::optional<py::list> multimodal, int32_t vocab_size) {
            CacheRequestOptions o{.id = id,
                                  .block_size = block_size,
                                  .cache_salt = std::move(cache_salt),
                                  .model_fingerprint = std::move(model_fingerprint),
                                  .adapter_id = adapter_id,
                                  .multimodal = MultimodalArgument(multimodal),
                                  .vocab_size = vocab_size};
            return Unwrap(CacheRequest::Create(std::move(o), prompt));
          }),
          arg("id"), arg("prompt"), py::kw_only(), arg("block_size") = 16, arg("cache_salt") = "",
          arg("model_fingerprint") = "", arg("adapter_id") = 0, arg("multimodal") = py::none(),
          arg("vocab_size") = 0)
      .def(
          "append_tokens",
          [](CacheRequest& r, std::vector<TokenId> tokens) { CheckStatus(r.AppendTokens(tokens)); },
          arg("tokens"), "Appends tokens (all or nothing) and hashes the blocks they complete.")
      .def(
          "append_token", [](CacheRequest& r, TokenId t) { CheckStatus(r.AppendToken(t)); },
          arg("token"), "Appends one token and hashes the block it completes.")
      .def(
          "truncate", [](CacheRequest& r, int64_t n) { CheckStatus(r.Truncate(n)); },
          arg("num_tokens"), "Keeps the first num_tokens tokens and their block hashes.")
      .def_property_readonly("id", &CacheRequest::id, "The request id.")
      .def_property_readonly("block_size", &CacheRequest::block_size, "Tokens per block.")
      .def_property_readonly("cache_salt", &CacheRequest::cache_salt,
                             "Salt: requests with different salts never share blocks.")
      .def_property_readonly("model_fingerprint", &CacheRequest::model_fingerprint,
                             "Model id and RoPE configuration, hashed into the chain root.")
      .def_property_readonly("adapter_id", &CacheRequest::adapter_id,
                             "LoRA adapter id mixed into block hashes; 0 means none.")
      .def_property_readonly("vocab_size", &CacheRequest::vocab_size,
                             "Vocabulary size tokens are checked against; 0 means unchecked.")
      .def_property_readonly("num_tokens", &CacheRequest::num_tokens,
                             "Tokens so far (prompt and appended).")
      .def_property_readonly("num_prompt_tokens", &CacheRequest::num_prompt_tokens,
                             "Tokens of the prompt given at creation.")
      .def_property_readonly("num_full_blocks", &CacheRequest::num_full_blocks,
                             "Full blocks, each with a chained hash.")
      .def_property_readonly(
          "tokens",
          [](const CacheRequest& r) { return ReadOnlyCopy(r.tokens().data(), r.tokens().size()); },
          "Every token so far (a read-only int32 copy).")
      .def_property_readonly(
          "block_hashes",
          [](const CacheRequest& r) {
            py::list out;
            for (const BlockHash& h : r.block_hashes()) out.append(HashToBytes(h));
            return out;
          },
          "Chained hash of each full block (16 bytes each).")
      .def_property_readonly(
          "root_hash", &CacheRequest::root_hash,
          "The chain root (16 bytes): from the cache salt and the model fingerprint.")
      .def("__len__", &CacheRequest::num_tokens)
      .def("__repr__", [](const CacheRequest& r) {
        return "CacheRequest(id=" + std::to_string(r.id()) +
               ", num_tokens=" + std::to_string(r.num_tokens()) +
               ", num_full_blocks=" + std::to_string(r.num_full_blocks()) + ")";
      });

  py::class_<ComputedBlocks> computed(m, "ComputedBlocks",
                                      "The longest cached prefix found by get_computed_blocks.");
  computed
      .def(py::init([](std::vector<BlockId> blocks, int64_t num_computed_tokens,
                       std::vector<std::vector<BlockId>> other_groups) {
             return ComputedBlocks{std::move(blocks), num_computed_tokens, std::move(other_groups)};
           }),
           arg("blocks") = std::vector<BlockId>{}, arg("num_computed_tokens") = 0,
           arg("other_groups") = std::vector<std::vector<BlockId>>{})
      .def_readonly("blocks", &ComputedBlocks::blocks,
                    "Group 0's cached blocks holding the request's first tokens, in order.")
      .def_readonly("num_computed_tokens", &ComputedBlocks::num_computed_tokens,
                    "Tokens those blocks hold (len(blocks) * block_size).")
      .def_readonly("other_groups", &ComputedBlocks::other_groups,
                    "Groups 1.. of a manager of several groups: their blocks (-1 where a "
                    "sliding-window group needs none); empty for one group.")
      .def_property_readonly(
          "group_blocks",
          [](const ComputedBlocks& c) {
            std::vector<std::vector<BlockId>> out = {c.blocks};
            out.insert(out.end(), c.other_groups.begin(), c.other_groups.end());
            return out;
          },
          "Every group's blocks, group 0 first.");
  AddDataclassMethods(computed, {"blocks", "num_computed_tokens", "other_groups"});
}

void BindStats(py::module_& m) {
  py::class_<CacheStats> stats(m, "CacheStats", "Prefix-cache counters (a snapshot).");
  stats.def(py::init<>())
      .def_readonly("lookups", &CacheStats::lookups, "Prefix lookups (get_computed_blocks calls).")
      .def_readonly("queried_tokens", &CacheStats::queried_tokens,
                    "Prompt tokens presented to those lookups.")
      .def_readonly("queried_blocks", &CacheStats::queried_blocks,
                    "Full blocks presented to those lookups.")
      .def_readonly("hit_tokens", &CacheStats::hit_tokens, "Tokens served from the cache.")
      .def_readonly("hit_blocks", &CacheStats::hit_blocks, "Blocks served from the cache.")
      .def_readonly("stored_blocks", &CacheStats::stored_blocks,
                    "Blocks that entered the hash index.")
      .def_readonly("evictions", &CacheStats::evictions,
                    "Cached blocks that left the index other than by a reset (evicted, unreachable "
                    "or uncached).")
      .def_readonly("verification_failures", &CacheStats::verification_failures,
                    "Hash hits rejected because the tokens or the parent did not match.")
      .def_readonly("replaced_blocks", &CacheStats::replaced_blocks,
                    "Indexed blocks replaced after failing verification.")
      .def_readonly("resets", &CacheStats::resets, "reset_prefix_cache calls.")
      .def_readonly("promoted_duplicates", &CacheStats::promoted_duplicates,
                    "Duplicate blocks indexed in place of their evicted holder.")
      .def_property_readonly("hit_rate", &CacheStats::HitRate, "hit_tokens / queried_tokens.")
      .def_property_readonly("block_hit_rate", &CacheStats::BlockHitRate,
                             "hit_blocks / queried_blocks, or 0 when nothing was queried.")
      .def("summary", &CacheStats::Summary, "One line with every counter and the hit rates.");
  AddDataclassMethods(stats, {"lookups", "queried_tokens", "queried_blocks", "hit_tokens",
                              "hit_blocks", "stored_blocks", "evictions", "verification_failures",
                              "replaced_blocks", "resets", "promoted_duplicates"});
}

void BindManagerQueries(py::class_<PyKvCacheManager>& c) {
  c.def(
       "block_table",
       [](PyKvCacheManager& self, RequestId id, int32_t group) {
         std::span<const BlockId> t = Unwrap(self.get().GetBlockTable(id, group));
         return ReadOnlyCopy(t.data(), t.size());
       },
       arg("request_id"), arg("group") = 0,
       "The request's block table of KV cache group `group`: a read-only int32 array (a copy, "
       "so it stays valid after allocate_slots / free), -1 for released sliding-window blocks.")
      .def(
          "slot_mapping",
          [](PyKvCacheManager& self, RequestId id, int64_t start, int64_t stop) {
            return SlotMapping(self.get(), id, start, stop);
          },
          arg("request_id"), arg("start"), arg("stop"),
          "KV slots (int64) of token positions [start, stop) of the request.")
      .def(
          "num_allocated_tokens",
          [](PyKvCacheManager& self, RequestId id) {
            return Unwrap(self.get().NumAllocatedTokens(id));
          },
          arg("request_id"),
          "Tokens of the request that have KV slots (computed prefix and allocated new tokens).")
      .def(
          "num_lookahead_tokens",
          [](PyKvCacheManager& self, RequestId id) {
            return Unwrap(self.get().NumLookaheadTokens(id));
          },
          arg("request_id"),
          "Slots reserved past the request's tokens for draft tokens (speculative decoding).")
      .def(
          "write_prometheus",
          [](PyKvCacheManager& self, std::map<std::string, std::string> labels) {
            PrometheusOptions options;
            for (auto& [k, v] : labels) options.labels.emplace_back(k, v);
            std::string text;
            CheckStatus(self.get().WritePrometheus(&text, options));
            return text;
          },
          py::kw_only(), arg("labels") = std::map<std::string, std::string>{},
          "The cache's metrics in the Prometheus text format (counters, usage, and with "
          "collect_block_metrics=True the block lifetime / idle / reuse-gap histograms).")
      .def("__contains__",
           [](PyKvCacheManager& self, RequestId id) { return self.get().HasRequest(id); })
      .def_property_readonly(
          "num_requests", [](PyKvCacheManager& self) { return self.get().NumRequests(); },
          "Requests the manager tracks.")
      .def_property_readonly(
          "num_blocks", [](PyKvCacheManager& self) { return self.get().num_blocks(); },
          "Blocks in the pool.")
      .def_property_readonly(
          "block_size", [](PyKvCacheManager& self) { return self.get().block_size(); },
          "Tokens per block.")
      .def_property_readonly(
          "num_available_blocks",
          [](PyKvCacheManager& self) { return self.get().NumAvailableBlocks(); },
          "Free + evictable blocks.")
      .def_property_readonly(
          "usage", [](PyKvCacheManager& self) { return self.get().Usage(); },
          "Fraction of blocks referenced by requests.")
      .def_property_readonly(
          "stats", [](PyKvCacheManager& self) { return self.get().stats(); },
          "Lookup counters merged with the pool's (stores, evictions, resets): a CacheStats "
          "snapshot.")
      .def(
          "reset_stats", [](PyKvCacheManager& self) { self.get().ResetStats(); },
          "Zeroes the counters (and the block histograms).")
      .def(
          "validate_invariants",
          [](PyKvCacheManager& self) { CheckStatus(self.get().ValidateInvariants()); },
          "Raises InternalError when an internal invariant is broken.");
}

void BindManagerEvents(py::class_<PyKvCacheManager>& c) {
  c.def(
       "take_events", [](PyKvCacheManager& self) { return self.hub.Take(); },
       "The KV events since the previous call, oldest first (BlockStored, BlockRemoved, "
       "AllBlocksCleared); empty when created with record_events=False.")
      .def(
          "add_event_listener",
          [](PyKvCacheManager& self, py::function fn) { return self.hub.AddListener(fn); },
          arg("listener"),
          "Calls listener(event) for every event as it happens; returns an id. The listener "
          "must not call back into this manager.")
      .def(
          "remove_event_listener",
          [](PyKvCacheManager& self, int id) { return self.hub.RemoveListener(id); },
          arg("listener_id"),
          "Unregisters a listener by the id add_event_listener returned; False when unknown.");
}

void BindManager(py::module_& m) {
  py::class_<PyKvCacheManager> c(
      m, "KvCacheManager",
      "Request-level prefix caching over a block pool (vLLM v1 style), for one KV cache group "
      "or several (groups=[KvCacheGroupSpec...]: full-attention and sliding-window layers, "
      "one block table per group over one pool). Not thread-safe.");
  c.def(py::init(&MakeManager), py::kw_only(), arg("num_blocks"), arg("block_size") = 16,
        arg("enable_prefix_caching") = true, arg("verify_tokens") = true,
        arg("eviction_policy") = "lru", arg("vocab_size") = 0, arg("model_fingerprint") = "",
        arg("record_events") = true, arg("collect_block_metrics") = false,
        arg("enable_priorities") = false, arg("max_high_priority_fraction") = 0.5,
        arg("groups") = std::vector<KvCacheGroupSpec>{}, arg("collect_event_batches") = false,
        arg("data_parallel_rank") = py::none())
      .def(
          "new_request",
          [](PyKvCacheManager& self, RequestId id, std::vector<TokenId> prompt,
             std::string cache_salt, uint64_t adapter_id, std::optional<py::list> multimodal,
             int32_t priority, double retention_seconds,
             const std::vector<PrioritySpanTuple>& priority_spans) {
            RequestCacheKeys keys{
                .cache_salt = std::move(cache_salt),
                .adapter_id = adapter_id,
                .multimodal = MultimodalArgument(multimodal),
                .priority = {.priority = priority, .retention_seconds = retention_seconds},
                .priority_spans = PrioritySpansArgument(priority_spans)};
            return Unwrap(self.get().NewRequest(id, prompt, keys));
          },
          arg("id"), arg("prompt"), py::kw_only(), arg("cache_salt") = "", arg("adapter_id") = 0,
          arg("multimodal") = py::none(), arg("priority") = kDefaultCachePriority,
          arg("retention_seconds") = std::numeric_limits<double>::infinity(),
          arg("priority_spans") = std::vector<PrioritySpanTuple>{},
          "A CacheRequest with this manager's block size, fingerprint, vocabulary and hasher; "
          "InvalidArgumentError for tokens outside the vocabulary.")
      .def(
          "get_computed_blocks",
          [](PyKvCacheManager& self, const CacheRequest& r) {
            return Unwrap(self.get().GetComputedBlocks(r));
          },
          arg("request"),
          "The longest verified cached prefix of `request` (at least one token is left to "
          "compute). Pins nothing: pass it to allocate_slots in the same step.")
      .def(
          "allocate_slots",
          [](PyKvCacheManager& self, const CacheRequest& r, int64_t n,
             std::optional<ComputedBlocks> computed, int64_t no_cache_from_token,
             int64_t num_lookahead_tokens) {
            CheckStatus(self.get().AllocateSlots(r, n, computed.value_or(ComputedBlocks{}),
                                                 {.no_cache_from_token = no_cache_from_token,
                                                  .num_lookahead_tokens = num_lookahead_tokens}));
          },
          arg("request"), arg("num_new_tokens"), arg("computed") = py::none(), py::kw_only(),
          arg("no_cache_from_token") = -1, arg("num_lookahead_tokens") = 0,
          "Reserves slots for num_new_tokens more tokens (plus num_lookahead_tokens draft slots, "
          "never cached).")
      .def(
          "truncate_request",
          [](PyKvCacheManager& self, CacheRequest& r, int64_t n) {
            CheckStatus(self.get().TruncateRequest(r, n));
          },
          arg("request"), arg("num_tokens"),
          "Rolls the request (and its CacheRequest) back to its first num_tokens tokens.")
      .def(
          "num_blocks_to_allocate",
          [](PyKvCacheManager& self, const CacheRequest& r, int64_t n,
             std::optional<ComputedBlocks> computed, int64_t num_lookahead_tokens) {
            return Unwrap(
                self.get().NumBlocksToAllocate(r, n, computed.value_or(ComputedBlocks{}),
                                               {.num_lookahead_tokens = num_lookahead_tokens}));
          },
          arg("request"), arg("num_new_tokens"), arg("computed") = py::none(), py::kw_only(),
          arg("num_lookahead_tokens") = 0,
          "How many new blocks allocate_slots with the same arguments would take; changes nothing.")
      .def(
          "free", [](PyKvCacheManager& self, RequestId id) { CheckStatus(self.get().Free(id)); },
          arg("request_id"),
          "Frees the request's blocks (full ones stay cached and evictable) and forgets it.")
      .def(
          "reset_prefix_cache", [](PyKvCacheManager& self) { self.get().ResetPrefixCache(); },
          "Drops every cached hash (running requests keep their blocks); emits AllBlocksCleared.")
      .def("__repr__", [](PyKvCacheManager& self) {
        const KvCacheManager& k = self.get();
        return "KvCacheManager(num_blocks=" + std::to_string(k.num_blocks()) +
               ", block_size=" + std::to_string(k.block_size()) +
               ", num_requests=" + std::to_string(k.NumRequests()) +
               ", num_available_blocks=" + std::to_string(k.NumAvailableBlocks()) + ")";
      });
  BindManagerQueries(c);
  BindManagerEvents(c);
  BindManagerGroups(c);
}

}  // namespace

py::array SlotMapping(const KvCacheManager& manager, RequestId id, int64_t start, int64_t stop) {
  std::span<const BlockId> table = Unwrap(manager.GetBlockTable(id));
  const int64_t bs = manager.block_size();
  const int64_t allocated = Unwrap(manager.NumAllocatedTokens(id));
  if (start < 0 || stop < start || stop > allocated) {
    ThrowInvalidArgument("slot_mapping: need 0 <= start <= stop <= " + std::to_string(allocated) +
                         " (the request's allocated tokens); got [" + std::to_string(start) + ", " +
                         std::to_string(stop) + ")");
  }
  std::vector<int64_t> slots;
  slots.reserve(static_cast<size_t>(stop - start));
  for (int64_t p = start; p < stop; ++p) {
    slots.push_back(static_cast<int64_t>(table[static_cast<size_t>(p / bs)]) * bs + p % bs);
  }
  return ReadOnlyCopy(slots.data(), slots.size());
}

void BindCache(py::module_& m) {
  BindEvents(m);
  BindCacheRequest(m);
  BindStats(m);
  BindManager(m);
}

}  // namespace pagedkv::python
