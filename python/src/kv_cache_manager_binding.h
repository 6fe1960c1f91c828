// Copyright 2026 The pagedkv Authors.
//
// The Python-side KvCacheManager: the C++ manager plus the EventHub behind take_events() and the
// Python listeners. The Scheduler binding holds one (and keeps its Python object alive).
//
// Example:
//   PyKvCacheManager& cache = py_cache.cast<PyKvCacheManager&>();
//   KvCacheManager& manager = cache.get();  // raises when called from one of its listeners
#ifndef PAGEDKV_PYTHON_SRC_KV_CACHE_MANAGER_BINDING_H_
#define PAGEDKV_PYTHON_SRC_KV_CACHE_MANAGER_BINDING_H_

#include <cstdint>
#include <memory>

#include "common.h"
#include "events.h"
#include "pagedkv/cache/kv_cache_manager.h"

namespace pagedkv::python {

struct PyKvCacheManager {
  EventHub hub;                             // declared first: destroyed after the manager
  std::unique_ptr<KvCacheManager> manager;  // never null once constructed

  // The manager, for a call from Python. RuntimeError inside one of its event listeners.
  KvCacheManager& get() {
    hub.CheckNotInListener();
    return *manager;
  }
};

// KV slots of token positions [start, stop) of request `id` (a read-only int64 array).
// NotFound for an unknown request; InvalidArgument outside its allocated tokens.
py::array SlotMapping(const KvCacheManager& manager, RequestId id, int64_t start, int64_t stop);

// bind_cache_groups.cc: the manager's KV cache group methods (called by BindManager).
void BindManagerGroups(py::class_<PyKvCacheManager>& c);

}  // namespace pagedkv::python

#endif  // PAGEDKV_PYTHON_SRC_KV_CACHE_MANAGER_BINDING_H_
