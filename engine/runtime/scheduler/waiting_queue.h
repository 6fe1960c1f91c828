// Copyright 2026 The pagedkv Authors.
//
// The scheduler's waiting queue: requests not running, in admission order. One ordered set serves
// both policies through the key it sorts by:
//   FCFS:     (0, 0, order)                       order = AddRequest sequence number
//   priority: (priority, arrival_time, order)
// A request preempted under FCFS is pushed to the front by giving it an order below every other
// (a decreasing counter); under priority it keeps its key, which already places it before later
// arrivals of its priority. O(log n) push / erase, O(1) front.
//
// Example:
//   WaitingQueue<Req> queue(SchedulingPolicy::kFcfs);
//   queue.PushBack(&req, /*priority=*/0, /*arrival_time=*/1.5);
//   Req* next = queue.Front();
//   queue.Erase(next);
#ifndef PAGEDKV_ENGINE_RUNTIME_SCHEDULER_WAITING_QUEUE_H_
#define PAGEDKV_ENGINE_RUNTIME_SCHEDULER_WAITING_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <tuple>

#include "absl/container/btree_set.h"
#include "pagedkv/export.h"
#include "pagedkv/runtime/scheduler.h"

namespace pagedkv::internal {

// Sort key of a waiting request; smaller is admitted first.
struct PAGEDKV_EXPORT WaitingKey {
  int64_t priority = 0;
  double arrival_time = 0.0;
  int64_t order = 0;  // unique per queued request

  friend bool operator<(const WaitingKey& a, const WaitingKey& b) {
    return std::tie(a.priority, a.arrival_time, a.order) <
           std::tie(b.priority, b.arrival_time, b.order);
  }
  friend bool operator==(const WaitingKey& a, const WaitingKey& b) {
    return a.priority == b.priority && a.arrival_time == b.arrival_time && a.order == b.order;
  }
};

// REQUIRES of T: a public member `WaitingKey waiting_key` that only this queue writes while the
// request is queued. The queue does not own the requests.
template <typename T>
class WaitingQueue {
 public:
  struct Entry {
    WaitingKey key;
    T* request;
    friend bool operator<(const Entry& a, const Entry& b) { return a.key < b.key; }
  };
  using Set = absl::btree_set<Entry>;

  explicit WaitingQueue(SchedulingPolicy policy) : policy_(policy) {}

  // Queues a newly arrived request behind all others of its rank.
  void PushBack(T* request, int32_t priority, double arrival_time) {
    Push(request, priority, arrival_time, ++back_order_);
  }
  // Queues a preempted request: at the very front under FCFS; under priority at its own key
  // (priority, arrival_time, original order), computed from `original_order`.
  void PushPreempted(T* request, int32_t priority, double arrival_time, int64_t original_order) {
    Push(request, priority, arrival_time,
         policy_ == SchedulingPolicy::kFcfs ? --front_order_ : original_order);
  }
  // REQUIRES: `request` is queued.
  void Erase(T* request) { set_.erase(Entry{request->waiting_key, request}); }
  // REQUIRES: !empty().
  T* Front() const { return set_.begin()->request; }
  bool empty() const { return set_.empty(); }
  size_t size() const { return set_.size(); }
  typename Set::const_iterator begin() const { return set_.begin(); }
  typename Set::const_iterator end() const { return set_.end(); }
  // The order the most recent PushBack assigned (callers keep it for PushPreempted).
  int64_t last_back_order() const { return back_order_; }

 private:
  void Push(T* request, int32_t priority, double arrival_time, int64_t order) {
    WaitingKey key;
    if (policy_ == SchedulingPolicy::kPriority) {
      key.priority = priority;
      key.arrival_time = arrival_time;
    }
    key.order = order;
    request->waiting_key = key;
    set_.insert(Entry{key, request});
  }

  SchedulingPolicy policy_;
  int64_t back_order_ = 0;
  int64_t front_order_ = 0;
  Set set_;
};

}  // namespace pagedkv::internal

#endif  // PAGEDKV_ENGINE_RUNTIME_SCHEDULER_WAITING_QUEUE_H_
