// Copyright 2026 The pagedkv Authors.
//
// Bindings of the hybrid KV cache (include/pagedkv/hybrid_kv_cache_manager.h): KvCacheGroupSpec,
// HybridComputedBlocks, HybridAllocationPlan and HybridKvCacheManager, for models whose layers
// mix full attention and sliding windows (gpt-oss, Gemma 3). Events come out per step as one
// vLLM-layout msgpack batch (take_event_batch), the bytes a ZeroMQ publisher would send.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common.h"
#include "pagedkv/hybrid_kv_cache_manager.h"
#include "pagedkv/kv_event_codec.h"

namespace pagedkv::python {
namespace {

using py::arg;

KvCacheGroupKind ParseGroupKind(const std::string& kind) {
  if (kind == KvCacheGroupKindName(KvCacheGroupKind::kFullAttention)) {
    return KvCacheGroupKind::kFullAttention;
  }
  if (kind == KvCacheGroupKindName(KvCacheGroupKind::kSlidingWindow)) {
    return KvCacheGroupKind::kSlidingWindow;
  }
  ThrowInvalidArgument(
      "KvCacheGroupSpec: kind must be \"full_attention\" or \"sliding_window\"; "
      "got \"" +
      kind + "\"");
}

std::unique_ptr<HybridKvCacheManager> MakeHybrid(int32_t num_blocks, int32_t block_size,
                                                 std::vector<KvCacheGroupSpec> groups,
                                                 bool enable_prefix_caching,
                                                 std::string eviction_policy, int32_t vocab_size,
                                                 std::string model_fingerprint,
                                                 bool collect_event_batches,
                                                 std::optional<int32_t> data_parallel_rank) {
  return Unwrap(HybridKvCacheManager::Create({.num_blocks = num_blocks,
                                              .block_size = block_size,
                                              .groups = std::move(groups),
                                              .enable_prefix_caching = enable_prefix_caching,
                                              .eviction_policy = std::move(eviction_policy),
                                              .vocab_size = vocab_size,
                                              .model_fingerprint = std::move(model_fingerprint),
                                              .collect_event_batches = collect_event_batches,
                                              .data_parallel_rank = data_parallel_rank}));
}

void BindGroupTypes(py::module_& m) {
  py::class_<KvCacheGroupSpec> spec(
      m, "KvCacheGroupSpec", "One KV cache group: layers with the same attention kind and window.");
  spec.def(py::init([](const std::string& kind, int32_t sliding_window, int32_t num_layers) {
             return KvCacheGroupSpec{.kind = ParseGroupKind(kind),
                                     .sliding_window = sliding_window,
                                     .num_layers = num_layers};
           }),
           arg("kind") = "full_attention", arg("sliding_window") = 0, arg("num_layers") = 1)
      .def_property_readonly(
          "kind",
          [](const KvCacheGroupSpec& s) { return std::string(KvCacheGroupKindName(s.kind)); },
          "\"full_attention\" or \"sliding_window\" (vLLM's KVCacheSpecKind values).")
      .def_readonly("sliding_window", &KvCacheGroupSpec::sliding_window,
                    "Window in tokens for a sliding-window group (> 0); 0 otherwise.")
      .def_readonly("num_layers", &KvCacheGroupSpec::num_layers,
                    "Layers in the group; weights num_held_layer_blocks.");
  AddDataclassMethods(spec, {"kind", "sliding_window", "num_layers"});

  py::class_<HybridComputedBlocks> hit(m, "HybridComputedBlocks",
                                       "The longest prefix every group holds "
                                       "(HybridKvCacheManager.get_computed_blocks).");
  hit.def_readonly("blocks", &HybridComputedBlocks::blocks,
                   "Per group, the hit's blocks; -1 where a sliding-window group needs none.")
      .def_readonly("num_computed_tokens", &HybridComputedBlocks::num_computed_tokens,
                    "Tokens the hit covers (a multiple of block_size).");
  AddDataclassMethods(hit, {"blocks", "num_computed_tokens"});

  py::class_<HybridAllocationPlan> plan(m, "HybridAllocationPlan",
                                        "What allocate_slots would take and release.");
  plan.def_readonly("per_group", &HybridAllocationPlan::per_group,
                    "Blocks each group takes from the pool (new and evictable hits).")
      .def_readonly("total", &HybridAllocationPlan::total, "Sum of per_group.")
      .def_readonly("released", &HybridAllocationPlan::released,
                    "Blocks each group unpins (out of its window).")
      .def_readonly("total_released", &HybridAllocationPlan::total_released, "Sum of released.");
  AddDataclassMethods(plan, {"per_group", "total", "released", "total_released"});
}

void BindHybridQueries(py::class_<HybridKvCacheManager>& c) {
  c.def(
       "block_table",
       [](const HybridKvCacheManager& self, RequestId id, int32_t group) {
         std::span<const BlockId> t = Unwrap(self.GetBlockTable(id, group));
         return ReadOnlyCopy(t.data(), t.size());
       },
       arg("request_id"), arg("group"),
       "Group `group`'s block table of the request: a read-only int32 array, -1 for released "
       "blocks.")
      .def(
          "num_held_blocks",
          [](const HybridKvCacheManager& self, RequestId id) {
            return Unwrap(self.NumHeldBlocks(id));
          },
          arg("request_id"), "Blocks the request holds over all groups.")
      .def(
          "num_held_layer_blocks",
          [](const HybridKvCacheManager& self, RequestId id) {
            return Unwrap(self.NumHeldLayerBlocks(id));
          },
          arg("request_id"),
          "Held blocks weighted by each group's num_layers (proportional to KV memory).")
      .def(
          "num_allocated_tokens",
          [](const HybridKvCacheManager& self, RequestId id) {
            return Unwrap(self.NumAllocatedTokens(id));
          },
          arg("request_id"), "Tokens of the request that have KV slots.")
      .def("__contains__", &HybridKvCacheManager::HasRequest)
      .def_property_readonly("num_requests", &HybridKvCacheManager::NumRequests,
                             "Requests the manager tracks.")
      .def_property_readonly("num_groups", &HybridKvCacheManager::num_groups, "KV cache groups.")
      .def_property_readonly(
          "groups", [](const HybridKvCacheManager& self) { return self.options().groups; },
          "The groups' specs, in group-index order.")
      .def_property_readonly("block_size", &HybridKvCacheManager::block_size, "Tokens per block.")
      .def_property_readonly("num_available_blocks", &HybridKvCacheManager::NumAvailableBlocks,
                             "Free + evictable blocks of the shared pool.")
      .def_property_readonly("stats", &HybridKvCacheManager::stats,
                             "Lookup counters merged with the pool's: a CacheStats snapshot.")
      .def(
          "validate_invariants",
          [](const HybridKvCacheManager& self) { CheckStatus(self.ValidateInvariants()); },
          "Raises InternalError when an internal invariant is broken.");
}

void BindHybridManager(py::module_& m) {
  py::class_<HybridKvCacheManager> c(
      m, "HybridKvCacheManager",
      "Prefix caching for models mixing full-attention and sliding-window layers: one block "
      "table per KV cache group over one pool, vLLM's hybrid hit rule. Not thread-safe.");
  c.def(py::init(&MakeHybrid), py::kw_only(), arg("num_blocks"), arg("block_size") = 16,
        arg("groups"), arg("enable_prefix_caching") = true, arg("eviction_policy") = "lru",
        arg("vocab_size") = 0, arg("model_fingerprint") = "", arg("collect_event_batches") = false,
        arg("data_parallel_rank") = py::none())
      .def(
          "new_request",
          [](const HybridKvCacheManager& self, RequestId id, std::vector<TokenId> prompt,
             std::string cache_salt) {
            return Unwrap(self.NewRequest(id, prompt, {.cache_salt = std::move(cache_salt)}));
          },
          arg("id"), arg("prompt"), py::kw_only(), arg("cache_salt") = "",
          "A CacheRequest with this manager's block size, fingerprint and vocabulary.")
      .def(
          "get_computed_blocks",
          [](HybridKvCacheManager& self, const CacheRequest& r) {
            return Unwrap(self.GetComputedBlocks(r));
          },
          arg("request"),
          "The longest prefix every group holds (never the whole prompt). Pins nothing: pass "
          "it to allocate_slots in the same step.")
      .def(
          "num_blocks_to_allocate",
          [](const HybridKvCacheManager& self, const CacheRequest& r, int64_t n,
             std::optional<HybridComputedBlocks> computed) {
            return Unwrap(
                self.NumBlocksToAllocate(r, n, computed.value_or(HybridComputedBlocks{})));
          },
          arg("request"), arg("num_new_tokens"), arg("computed") = py::none(),
          "What allocate_slots with the same arguments would take and release; changes nothing.")
      .def(
          "allocate_slots",
          [](HybridKvCacheManager& self, const CacheRequest& r, int64_t n,
             std::optional<HybridComputedBlocks> computed) {
            CheckStatus(self.AllocateSlots(r, n, computed.value_or(HybridComputedBlocks{})));
          },
          arg("request"), arg("num_new_tokens"), arg("computed") = py::none(),
          "Reserves slots for num_new_tokens more tokens in every group; releases "
          "sliding-window blocks that fell out of the window (cached ones stay evictable).")
      .def(
          "free", [](HybridKvCacheManager& self, RequestId id) { CheckStatus(self.Free(id)); },
          arg("request_id"), "Frees every group's blocks (full ones stay cached) and forgets it.")
      .def(
          "take_event_batch",
          [](HybridKvCacheManager& self, double timestamp, const std::string& encoding) {
            const KvEventBatch batch = self.TakeEventBatch(timestamp);
            const std::string bytes =
                EncodeKvEventBatch(batch, {.encoding = Unwrap(ParseKvEventEncoding(encoding))});
            return py::bytes(bytes);
          },
          arg("timestamp"), py::kw_only(), arg("encoding") = "vllm",
          "The events since the previous call as one msgpack batch (vLLM 0.33's layout by "
          "default), each event with group_idx, kv_cache_spec_kind and (sliding-window stored "
          "events) kv_cache_spec_sliding_window. Empty batch unless collect_event_batches=True.")
      .def("__repr__", [](const HybridKvCacheManager& self) {
        return "HybridKvCacheManager(num_groups=" + std::to_string(self.num_groups()) +
               ", block_size=" + std::to_string(self.block_size()) +
               ", num_requests=" + std::to_string(self.NumRequests()) +
               ", num_available_blocks=" + std::to_string(self.NumAvailableBlocks()) + ")";
      });
  BindHybridQueries(c);
}

}  // namespace

void BindHybrid(py::module_& m) {
  BindGroupTypes(m);
  BindHybridManager(m);
}

}  // namespace pagedkv::python
