// Copyright 2026 The pagedkv Authors.
//
// The linked library's version (pagedkv/version.h).
#include "pagedkv/version.h"

namespace pagedkv {

const char* VersionString() { return PAGEDKV_VERSION_STRING; }

}  // namespace pagedkv
