// Copyright 2026 The pagedkv Authors.
//
// Bindings of KV cache groups (include/pagedkv/cache/kv_cache_groups.h): KvCacheGroupSpec,
// AllocationPlan, and the KvCacheManager methods that name groups (block tables per group, held
// blocks, plan_allocation, msgpack event batches with group fields). The deprecated
// HybridKvCacheManager alias lives in python/pagedkv/__init__.py.
#include <optional>
#include <string>
#include <vector>

#include "common.h"
#include "kv_cache_manager_binding.h"
#include "pagedkv/cache/kv_cache_groups.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/events/kv_event_codec.h"

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
      "KvCacheGroupSpec: kind must be \"full_attention\" or \"sliding_window\"; got \"" + kind +
      "\"");
}

}  // namespace

void BindCacheGroupTypes(py::module_& m) {
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

  py::class_<AllocationPlan> plan(m, "AllocationPlan",
                                  "What allocate_slots would take and release, per group.");
  plan.def_readonly("per_group", &AllocationPlan::per_group,
                    "Blocks each group takes from the pool (new and evictable hits).")
      .def_readonly("total", &AllocationPlan::total, "Sum of per_group.")
      .def_readonly("released", &AllocationPlan::released,
                    "Blocks each group unpins (out of its window).")
      .def_readonly("total_released", &AllocationPlan::total_released, "Sum of released.");
  AddDataclassMethods(plan, {"per_group", "total", "released", "total_released"});
}

void BindManagerGroups(py::class_<PyKvCacheManager>& c) {
  c.def_property_readonly(
       "num_groups", [](PyKvCacheManager& self) { return self.get().num_groups(); },
       "KV cache groups (1 unless groups were given).")
      .def_property_readonly(
          "groups",
          [](PyKvCacheManager& self) {
            std::vector<KvCacheGroupSpec> out;
            for (int32_t g = 0; g < self.get().num_groups(); ++g)
              out.push_back(self.get().group(g));
            return out;
          },
          "The groups' specs, in group-index order.")
      .def(
          "num_held_blocks",
          [](PyKvCacheManager& self, RequestId id) { return Unwrap(self.get().NumHeldBlocks(id)); },
          arg("request_id"), "Blocks the request holds over all groups.")
      .def(
          "num_held_layer_blocks",
          [](PyKvCacheManager& self, RequestId id) {
            return Unwrap(self.get().NumHeldLayerBlocks(id));
          },
          arg("request_id"),
          "Held blocks weighted by each group's num_layers (proportional to KV memory).")
      .def(
          "plan_allocation",
          [](PyKvCacheManager& self, const CacheRequest& r, int64_t n,
             std::optional<ComputedBlocks> computed, int64_t num_lookahead_tokens) {
            return Unwrap(
                self.get().PlanAllocation(r, n, computed.value_or(ComputedBlocks{}),
                                          {.num_lookahead_tokens = num_lookahead_tokens}));
          },
          arg("request"), arg("num_new_tokens"), arg("computed") = py::none(), py::kw_only(),
          arg("num_lookahead_tokens") = 0,
          "What allocate_slots with the same arguments would take and release, per group; "
          "changes nothing.")
      .def(
          "take_event_batch",
          [](PyKvCacheManager& self, double timestamp, const std::string& encoding) {
            const KvEventBatch batch = self.get().TakeEventBatch(timestamp);
            const std::string bytes =
                EncodeKvEventBatch(batch, {.encoding = Unwrap(ParseKvEventEncoding(encoding))});
            return py::bytes(bytes);
          },
          arg("timestamp"), py::kw_only(), arg("encoding") = "vllm",
          "The events since the previous call as one msgpack batch (vLLM 0.33's layout by "
          "default); with several groups each event carries group_idx, kv_cache_spec_kind and "
          "(sliding-window stored events) kv_cache_spec_sliding_window. Empty batch unless "
          "collect_event_batches=True.");
}

}  // namespace pagedkv::python
