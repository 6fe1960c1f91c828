// Copyright 2026 The pagedkv Authors.
//
// KV events in Python: the event classes pagedkv.BlockStored, pagedkv.BlockRemoved and
// pagedkv.AllBlocksCleared, and EventHub, the per-object state behind take_events() and
// add_event_listener() of KvCacheManager and BlockPool.
//
// An EventHub registers one C++ listener on its owner. Each event is converted to its Python
// object at once (the GIL is held: cache calls never release it), appended to the take_events()
// batch when recording is on, and passed to every Python listener in registration order. A
// listener's exception is reported through sys.unraisablehook (it cannot unwind through the cache
// code); a listener that calls back into the object that emitted the event gets RuntimeError,
// since the C++ listener contract forbids re-entry.
//
// Example (what the KvCacheManager binding does):
//   hub.Attach(*manager, /*record=*/true);
//   ...
//   py::list batch = hub.Take();  // [BlockStored(...), BlockRemoved(...), ...]
#ifndef PAGEDKV_PYTHON_SRC_EVENTS_H_
#define PAGEDKV_PYTHON_SRC_EVENTS_H_

#include <map>
#include <vector>

#include "common.h"
#include "pagedkv/events/kv_events.h"

namespace pagedkv::python {

class EventHub {
 public:
  EventHub() = default;
  EventHub(const EventHub&) = delete;
  EventHub& operator=(const EventHub&) = delete;

  // Registers the hub's listener on `owner` (a BlockPool or KvCacheManager that outlives the
  // hub's use; declare the hub before the owner so the owner is destroyed first). `record`:
  // keep events for Take().
  template <typename Owner>
  void Attach(Owner& owner, bool record) {
    record_ = record;
    owner.AddEventListener([this](const KvEvent& event) { OnEvent(event); });
  }

  // The events recorded since the previous call, oldest first; the buffer is emptied.
  py::list Take();
  bool recording() const { return record_; }

  // Adds a Python listener (called with each event object); returns its id.
  int AddListener(py::function listener);
  // False when `id` is unknown.
  bool RemoveListener(int id);

  // Raises RuntimeError when called from inside one of this hub's listeners.
  void CheckNotInListener() const;

 private:
  void OnEvent(const KvEvent& event);

  bool record_ = false;
  bool in_listener_ = false;
  std::vector<py::object> recorded_;
  std::map<int, py::function> listeners_;
  int next_id_ = 1;
};

// Defines the event classes in `m`.
void BindEvents(py::module_& m);

}  // namespace pagedkv::python

#endif  // PAGEDKV_PYTHON_SRC_EVENTS_H_
