// Copyright 2026 The pagedkv Authors.
//
// Shared pieces of the Python bindings: the pagedkv.Error exception hierarchy and the translation
// of absl::Status into it, the BlockHash <-> bytes conversion, read-only numpy views that keep
// their owner alive, and dataclass-like methods (__repr__, __eq__, as_dict) for bound structs.
//
// Example (inside a binding):
//   pagedkv::python::CheckStatus(manager.Free(id));            // raises NotFoundError on error
//   int32_t n = pagedkv::python::Unwrap(manager.NumBlocksToAllocate(req, 4));
//   py::array view = pagedkv::python::ReadOnlyView(batch.token_ids, py_batch);  // no copy
#ifndef PAGEDKV_PYTHON_SRC_COMMON_H_
#define PAGEDKV_PYTHON_SRC_COMMON_H_

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/cache/cache_priority.h"
#include "pagedkv/cache/eviction_policy.h"

namespace pagedkv::python {

namespace py = pybind11;

// A non-OK status on its way to Python; the translator registered by RegisterErrors turns it
// into the pagedkv.Error subclass of its code.
class StatusError : public std::exception {
 public:
  explicit StatusError(absl::Status status)
      : status_(std::move(status)), what_(status_.ToString()) {}
  const absl::Status& status() const { return status_; }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  absl::Status status_;
  std::string what_;
};

// Raises (throws StatusError) when `status` is not OK.
inline void CheckStatus(const absl::Status& status) {
  if (!status.ok()) throw StatusError(status);
}

// The value of `result`, or raises its error.
template <typename T>
T Unwrap(absl::StatusOr<T> result) {
  if (!result.ok()) throw StatusError(result.status());
  return *std::move(result);
}

// Creates pagedkv.Error and its subclasses in `m` and registers the StatusError translator.
void RegisterErrors(py::module_& m);

// Raises pagedkv.InvalidArgumentError (also a ValueError) with `message`.
[[noreturn]] void ThrowInvalidArgument(const std::string& message);

// 16 bytes: the low 64 bits then the high 64 bits, each little-endian.
py::bytes HashToBytes(const BlockHash& hash);

// A read-only 1-D numpy view of `data` whose base is `owner`, so the memory stays valid for as
// long as the array lives. REQUIRES: `owner` keeps `data` alive and unchanged.
template <typename T>
py::array ReadOnlyView(const T* data, size_t size, py::handle owner) {
  py::array_t<T> view({static_cast<py::ssize_t>(size)}, {static_cast<py::ssize_t>(sizeof(T))}, data,
                      owner);
  py::detail::array_proxy(view.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return view;
}
template <typename T>
py::array ReadOnlyView(const std::vector<T>& data, py::handle owner) {
  return ReadOnlyView(data.data(), data.size(), owner);
}

// A read-only numpy array holding a copy of `data`.
template <typename T>
py::array ReadOnlyCopy(const T* data, size_t size) {
  py::array_t<T> copy(static_cast<py::ssize_t>(size));
  if (size > 0) std::memcpy(copy.mutable_data(), data, size * sizeof(T));
  py::detail::array_proxy(copy.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return copy;
}

// Adds __repr__ ("Name(a=1, b=2)"), __eq__ and as_dict() to `cls`, built from the attributes
// named in `fields` (which the class must expose).
void AddDataclassMethods(py::handle cls, std::vector<std::string> fields);

// `policy` is a built-in policy name (str: sets *name, returns null) or an object implementing
// pagedkv.EvictionPolicy (returns an adapter that calls it; the adapter keeps it alive).
// InvalidArgument for anything else.
std::unique_ptr<EvictionPolicy> PolicyArgument(py::handle policy, std::string* name);

// (begin_token, end_token, priority) tuples as priority spans (no retention limit).
using PrioritySpanTuple = std::tuple<int64_t, int64_t, int32_t>;
std::vector<PrioritySpan> PrioritySpansArgument(const std::vector<PrioritySpanTuple>& spans);

// Bind each area into the extension module (one source file each).
void BindCache(py::module_& m);
void BindPool(py::module_& m);
void BindScheduler(py::module_& m);
void BindReplay(py::module_& m);
void BindEngine(py::module_& m);
void BindGguf(py::module_& m);
// bind_cache_groups.cc: KvCacheGroupSpec and AllocationPlan (before BindCache).
void BindCacheGroupTypes(py::module_& m);
// bind_chunk_reuse.cc: ChunkReuseOptions (before BindEngine, whose load takes one).
void BindChunkReuseOptions(py::module_& m);

}  // namespace pagedkv::python

namespace pybind11::detail {

// pagedkv::BlockHash <-> Python bytes of length 16 (see HashToBytes).
template <>
struct type_caster<pagedkv::BlockHash> {
  PYBIND11_TYPE_CASTER(pagedkv::BlockHash, const_name("bytes"));

  bool load(handle src, bool /*convert*/) {
    char* data = nullptr;
    Py_ssize_t size = 0;
    if (!PyBytes_Check(src.ptr())) return false;
    if (PyBytes_AsStringAndSize(src.ptr(), &data, &size) != 0 || size != 16) {
      PyErr_Clear();
      return false;
    }
    std::memcpy(&value.low, data, 8);
    std::memcpy(&value.high, data + 8, 8);
    return true;
  }

  static handle cast(const pagedkv::BlockHash& hash, return_value_policy, handle) {
    return pagedkv::python::HashToBytes(hash).release();
  }
};

}  // namespace pybind11::detail

#endif  // PAGEDKV_PYTHON_SRC_COMMON_H_
