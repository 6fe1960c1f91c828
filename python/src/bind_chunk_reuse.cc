// Copyright 2026 The pagedkv Authors.
//
// Binding of the Engine's shifted-position chunk reuse options (EngineOptions::chunk_reuse,
// include/pagedkv/runtime/engine_options.h) as pagedkv.ChunkReuseOptions, which Engine.load takes
// as chunk_reuse=. The ranges are checked where the C++ engine checks them (Engine.load raises
// InvalidArgumentError); only the mode's name is checked here.
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "common.h"
#include "pagedkv/runtime/engine_options.h"

namespace pagedkv::python {
namespace {

using py::arg;

ChunkReuseMode ParseChunkReuseMode(const std::string& mode) {
  if (mode == "off") return ChunkReuseMode::kOff;
  if (mode == "rerotate") return ChunkReuseMode::kReRotate;
  ThrowInvalidArgument("ChunkReuseOptions: mode = '" + mode + "': expected 'rerotate' or 'off'");
}

std::string ChunkReuseModeName(ChunkReuseMode mode) {
  return mode == ChunkReuseMode::kReRotate ? "rerotate" : "off";
}

std::string Repr(const ChunkReuseOptions& o) {
  return absl::StrCat("ChunkReuseOptions(mode='", ChunkReuseModeName(o.mode),
                      "', first_k=", o.first_k, ", recompute_fraction=", o.recompute_fraction,
                      ", deviation_layer=", o.deviation_layer,
                      ", float_keys_memory=", o.float_keys_memory, ")");
}

}  // namespace

void BindChunkReuseOptions(py::module_& m) {
  py::class_<ChunkReuseOptions>(
      m, "ChunkReuseOptions",
      "Shifted-position chunk reuse for Engine.load(chunk_reuse=...) (EngineOptions::"
      "chunk_reuse, docs/shifted_reuse.md): spans a request marks with chunks=[(offset, "
      "length)] are cached by content and reused at any position, their keys re-rotated. "
      "mode: 'rerotate' (on) or 'off'. first_k: each reused chunk's first k tokens recomputed "
      "(EPIC). recompute_fraction: CacheBlend's share of each reused chunk's tokens recomputed "
      "through every layer, those deviating most at deviation_layer (0: off). "
      "float_keys_memory: bytes of host memory keeping registered chunks' float keys until they "
      "move, so a quantized KV cache's moved key is rounded once (0: off).")
      .def(py::init([](const std::string& mode, int32_t first_k, double recompute_fraction,
                       int32_t deviation_layer, int64_t float_keys_memory) {
             return ChunkReuseOptions{.mode = ParseChunkReuseMode(mode),
                                      .first_k = first_k,
                                      .recompute_fraction = recompute_fraction,
                                      .deviation_layer = deviation_layer,
                                      .float_keys_memory = float_keys_memory};
           }),
           py::kw_only(), arg("mode") = "rerotate", arg("first_k") = 0,
           arg("recompute_fraction") = 0.0, arg("deviation_layer") = 1,
           arg("float_keys_memory") = int64_t{0})
      .def_property(
          "mode", [](const ChunkReuseOptions& o) { return ChunkReuseModeName(o.mode); },
          [](ChunkReuseOptions& o, const std::string& mode) { o.mode = ParseChunkReuseMode(mode); },
          "'rerotate' or 'off'.")
      .def_readwrite("first_k", &ChunkReuseOptions::first_k,
                     "Leading tokens of each reused chunk recomputed (EPIC); >= 0.")
      .def_readwrite("recompute_fraction", &ChunkReuseOptions::recompute_fraction,
                     "CacheBlend's share of each reused chunk's tokens recomputed through every "
                     "layer, in [0, 1]; 0: off.")
      .def_readwrite("deviation_layer", &ChunkReuseOptions::deviation_layer,
                     "The layer whose K/V deviation picks CacheBlend's tokens; below n_layers.")
      .def_readwrite("float_keys_memory", &ChunkReuseOptions::float_keys_memory,
                     "Bytes of host memory keeping registered chunks' float keys until they "
                     "move; >= 0; 0: off.")
      .def("__repr__", &Repr);
}

}  // namespace pagedkv::python
