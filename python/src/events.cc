// Copyright 2026 The pagedkv Authors.
#include "events.h"

#include <string>
#include <utility>

namespace pagedkv::python {
namespace {

// Owned copies of a KvEvent, one struct per type (the C++ event's token span dies with the
// callback).
struct BlockStored {
  BlockHash hash;
  BlockHash parent_hash;
  std::vector<TokenId> token_ids;
  int32_t token_count = 0;
  BlockId block = kNullBlock;
};
struct BlockRemoved {
  BlockHash hash;
  BlockId block = kNullBlock;
};
struct AllBlocksCleared {};

py::object ToPython(const KvEvent& e) {
  switch (e.type) {
    case KvEventType::kBlockStored:
      return py::cast(BlockStored{.hash = e.hash,
                                  .parent_hash = e.parent_hash,
                                  .token_ids = {e.token_ids.begin(), e.token_ids.end()},
                                  .token_count = e.token_count,
                                  .block = e.block});
    case KvEventType::kBlockRemoved:
      return py::cast(BlockRemoved{.hash = e.hash, .block = e.block});
    case KvEventType::kAllBlocksCleared:
      return py::cast(AllBlocksCleared{});
  }
  return py::none();
}

}  // namespace

py::list EventHub::Take() {
  CheckNotInListener();
  py::list out(recorded_.size());
  for (size_t i = 0; i < recorded_.size(); ++i) out[i] = std::move(recorded_[i]);
  recorded_.clear();
  return out;
}

int EventHub::AddListener(py::function listener) {
  CheckNotInListener();
  const int id = next_id_++;
  listeners_.emplace(id, std::move(listener));
  return id;
}

bool EventHub::RemoveListener(int id) {
  CheckNotInListener();
  return listeners_.erase(id) > 0;
}

void EventHub::CheckNotInListener() const {
  if (in_listener_) {
    throw std::runtime_error(
        "a pagedkv event listener must not call back into the object that emitted the event; "
        "record what you need and act after the call returns");
  }
}

void EventHub::OnEvent(const KvEvent& event) {
  if (!record_ && listeners_.empty()) return;
  py::gil_scoped_acquire gil;
  py::object object = ToPython(event);
  if (record_) recorded_.push_back(object);
  if (listeners_.empty()) return;
  // Copy: a listener may not add or remove listeners (re-entry is refused), but be safe.
  std::vector<py::function> listeners;
  for (const auto& [id, fn] : listeners_) listeners.push_back(fn);
  in_listener_ = true;
  for (const py::function& fn : listeners) {
    try {
      fn(object);
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("pagedkv event listener");
    }
  }
  in_listener_ = false;
}

void BindEvents(py::module_& m) {
  py::class_<BlockStored> stored(m, "BlockStored",
                                 "A block entered the prefix-cache index (vLLM's BlockStored).");
  stored.def_readonly("hash", &BlockStored::hash, "The block's hash (16 bytes).")
      .def_readonly("parent_hash", &BlockStored::parent_hash,
                    "The previous block's hash; the chain root for a first block.")
      .def_readonly("token_ids", &BlockStored::token_ids,
                    "The block's tokens when known, else empty.")
      .def_readonly("token_count", &BlockStored::token_count, "Tokens in the block.")
      .def_readonly("block", &BlockStored::block, "Physical block id.");
  AddDataclassMethods(stored, {"hash", "parent_hash", "token_ids", "token_count", "block"});

  py::class_<BlockRemoved> removed(m, "BlockRemoved",
                                   "A block left the index (evicted or replaced).");
  removed.def_readonly("hash", &BlockRemoved::hash, "The block's hash (16 bytes).")
      .def_readonly("block", &BlockRemoved::block, "Physical block id.");
  AddDataclassMethods(removed, {"hash", "block"});

  py::class_<AllBlocksCleared> cleared(m, "AllBlocksCleared",
                                       "reset_prefix_cache() dropped the whole index.");
  AddDataclassMethods(cleared, {});
}

}  // namespace pagedkv::python
