// Copyright 2026 The pagedkv Authors.
//
// The extension module pagedkv._pagedkv; the package's __init__.py re-exports it. Each bound
// area lives in its own file (bind_*.cc).
#include "common.h"
#include "pagedkv/version.h"

PYBIND11_MODULE(_pagedkv, m) {
  namespace python = pagedkv::python;
  m.doc() = "pagedkv: paged KV cache, prefix caching, scheduler, replay and engine (C++ core).";
  // The linked library's version, which equals the C++ headers' PAGEDKV_VERSION_STRING.
  m.attr("__version__") = pagedkv::VersionString();
  // The pybind11 this module was built with: before 2.12 it speaks NumPy 1's C API only, and the
  // package refuses NumPy 2 at import (__init__.py) rather than hand out arrays with wrong strides.
  m.attr("_pybind11_version") =
      pybind11::make_tuple(PYBIND11_VERSION_MAJOR, PYBIND11_VERSION_MINOR);
  python::RegisterErrors(m);
  python::BindCacheGroupTypes(m);
  python::BindCache(m);
  python::BindPool(m);
  python::BindScheduler(m);
  python::BindReplay(m);
  python::BindChunkReuseOptions(m);
  python::BindEngine(m);
  python::BindGguf(m);
}
