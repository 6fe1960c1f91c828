// Copyright 2026 The pagedkv Authors.
//
// The extension module pagedkv._pagedkv; the package's __init__.py re-exports it. Each bound
// area lives in its own file (bind_*.cc).
#include "common.h"

#ifndef PAGEDKV_VERSION_STRING
#error "PAGEDKV_VERSION_STRING must be defined (python/CMakeLists.txt passes PROJECT_VERSION)"
#endif

PYBIND11_MODULE(_pagedkv, m) {
  namespace python = pagedkv::python;
  m.doc() = "pagedkv: paged KV cache, prefix caching, scheduler, replay and engine (C++ core).";
  m.attr("__version__") = PAGEDKV_VERSION_STRING;
  python::RegisterErrors(m);
  python::BindCache(m);
  python::BindPool(m);
  python::BindScheduler(m);
  python::BindReplay(m);
  python::BindEngine(m);
}
