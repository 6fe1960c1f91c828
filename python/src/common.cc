// Copyright 2026 The pagedkv Authors.
#include "common.h"

#include <bit>
#include <map>

#include "absl/status/status.h"

namespace pagedkv::python {
namespace {

static_assert(std::endian::native == std::endian::little,
              "BlockHash <-> bytes copies the words as they lie in memory");

// One exception class per absl::StatusCode (except OK), with its extra Python base.
struct ErrorClass {
  absl::StatusCode code;
  const char* name;
  PyObject* extra_base;  // a builtin exception the class also derives from, or null
  const char* doc;       // the class's docstring
};

std::vector<ErrorClass> ErrorClasses() {
  using C = absl::StatusCode;
  return {
      {C::kInvalidArgument, "InvalidArgumentError", PyExc_ValueError,
       "pagedkv.Error: a bad argument, option or file; fix the input (also a "
       "ValueError)."},
      {C::kNotFound, "NotFoundError", PyExc_KeyError,
       "pagedkv.Error: an unknown request, block, chunk or file (also a KeyError)."},
      {C::kResourceExhausted, "ResourceExhaustedError", nullptr,
       "pagedkv.Error: out of KV blocks or memory; nothing changed, free or retry "
       "later."},
      {C::kFailedPrecondition, "FailedPreconditionError", nullptr,
       "pagedkv.Error: the object is not in the state the call needs (e.g. a pending "
       "step)."},
      {C::kAlreadyExists, "AlreadyExistsError", nullptr,
       "pagedkv.Error: an id that is already in use."},
      {C::kOutOfRange, "OutOfRangeError", PyExc_IndexError,
       "pagedkv.Error: an index or position past the end (also an IndexError)."},
      {C::kAborted, "AbortedError", nullptr,
       "pagedkv.Error: a sequence of calls must be redone (e.g. blocks changed since the "
       "lookup)."},
      {C::kUnavailable, "UnavailableError", nullptr,
       "pagedkv.Error: a service (a tier, a socket) cannot be reached now; retry."},
      {C::kDataLoss, "DataLossError", nullptr, "pagedkv.Error: corrupt or truncated data."},
      {C::kInternal, "InternalError", nullptr,
       "pagedkv.Error: a bug in pagedkv or in a Python callback it called."},
      {C::kUnimplemented, "UnimplementedError", PyExc_NotImplementedError,
       "pagedkv.Error: a feature this build lacks (also a NotImplementedError)."},
      {C::kPermissionDenied, "PermissionDeniedError", nullptr,
       "pagedkv.Error: the operating system refused access."},
      {C::kUnauthenticated, "UnauthenticatedError", nullptr,
       "pagedkv.Error: a service refused the credentials."},
      {C::kDeadlineExceeded, "DeadlineExceededError", nullptr,
       "pagedkv.Error: a time limit passed."},
      {C::kCancelled, "CancelledError", nullptr, "pagedkv.Error: the operation was cancelled."},
      {C::kUnknown, "UnknownError", nullptr, "pagedkv.Error: an error with no better code."},
  };
}

// Class objects, filled by RegisterErrors; they live as long as the module (never freed).
PyObject* g_error_base = nullptr;
std::map<absl::StatusCode, PyObject*>* g_error_by_code = nullptr;

// Raises `status` as the pagedkv.Error subclass of its code: the message is the C++ message and
// the instance's `code` attribute is the code's name (e.g. "NOT_FOUND").
void SetPythonError(const absl::Status& status) {
  auto it = g_error_by_code->find(status.code());
  PyObject* cls = it == g_error_by_code->end() ? g_error_base : it->second;
  py::str message(status.message().data(), status.message().size());
  py::object instance = py::reinterpret_steal<py::object>(PyObject_CallOneArg(cls, message.ptr()));
  if (!instance) return;  // the call set a Python error already
  instance.attr("code") = absl::StatusCodeToString(status.code());
  PyErr_SetObject(cls, instance.ptr());
}

}  // namespace

void RegisterErrors(py::module_& m) {
  g_error_base = PyErr_NewExceptionWithDoc(
      "pagedkv.Error",
      "Base class of every error pagedkv raises; `code` names the absl status code.",
      PyExc_Exception, nullptr);
  m.attr("Error") = py::handle(g_error_base);
  g_error_by_code = new std::map<absl::StatusCode, PyObject*>();
  for (const ErrorClass& e : ErrorClasses()) {
    py::tuple bases = e.extra_base != nullptr
                          ? py::make_tuple(py::handle(g_error_base), py::handle(e.extra_base))
                          : py::make_tuple(py::handle(g_error_base));
    const std::string qualified = std::string("pagedkv.") + e.name;
    PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), e.doc, bases.ptr(), nullptr);
    if (cls == nullptr) throw py::error_already_set();
    (*g_error_by_code)[e.code] = cls;
    m.attr(e.name) = py::handle(cls);
  }
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      SetPythonError(e.status());
    }
  });
}

void ThrowInvalidArgument(const std::string& message) {
  throw StatusError(absl::InvalidArgumentError(message));
}

py::bytes HashToBytes(const BlockHash& hash) {
  char bytes[16];
  std::memcpy(bytes, &hash.low, 8);
  std::memcpy(bytes + 8, &hash.high, 8);
  return py::bytes(bytes, sizeof(bytes));
}

void AddDataclassMethods(py::handle cls, std::vector<std::string> fields) {
  py::object type = py::reinterpret_borrow<py::object>(cls);
  auto shared = std::make_shared<std::vector<std::string>>(std::move(fields));
  type.attr("__repr__") = py::cpp_function(
      [shared](py::handle self) {
        std::string out = py::str(self.get_type().attr("__name__")).cast<std::string>() + "(";
        for (size_t i = 0; i < shared->size(); ++i) {
          if (i > 0) out += ", ";
          out += (*shared)[i] + "=" + py::repr(self.attr((*shared)[i].c_str())).cast<std::string>();
        }
        return out + ")";
      },
      py::is_method(type));
  type.attr("as_dict") = py::cpp_function(
      [shared](py::handle self) {
        py::dict d;
        for (const std::string& f : *shared) d[f.c_str()] = self.attr(f.c_str());
        return d;
      },
      py::is_method(type), py::doc("The fields as a dict (name -> value)."));
  type.attr("__eq__") = py::cpp_function(
      [shared](py::handle self, py::handle other) -> py::object {
        if (!other.get_type().is(self.get_type()))
          return py::reinterpret_borrow<py::object>(Py_NotImplemented);
        for (const std::string& f : *shared) {
          if (!self.attr(f.c_str()).equal(other.attr(f.c_str()))) return py::bool_(false);
        }
        return py::bool_(true);
      },
      py::is_method(type));
  type.attr("__hash__") = py::none();
}

std::vector<PrioritySpan> PrioritySpansArgument(const std::vector<PrioritySpanTuple>& spans) {
  std::vector<PrioritySpan> out;
  out.reserve(spans.size());
  for (const auto& [begin, end, priority] : spans) {
    out.push_back({.begin_token = begin, .end_token = end, .priority = {.priority = priority}});
  }
  return out;
}

}  // namespace pagedkv::python
