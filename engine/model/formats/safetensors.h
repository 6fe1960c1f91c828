// Copyright 2026 The pagedkv Authors.
//
// SafetensorsFile: one memory-mapped .safetensors file with a validated header; and
// SafetensorsCheckpoint: the tensors of a Hugging Face model directory, from `model.safetensors`
// or from the shards listed in `model.safetensors.index.json`.
//
// Format (https://github.com/huggingface/safetensors): u64 little-endian N, then N bytes of JSON
// mapping each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to
// the byte after the header) plus an optional "__metadata__" object of strings, then the data.
// Open() checks every field: the header fits in the file, every dtype is a known safetensors
// dtype, shapes are non-negative, end - begin equals elements x dtype size, every range lies
// inside the file, and no two ranges overlap. Errors are InvalidArgument naming the file and the
// tensor. Reads never go outside the mapped bytes.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(SafetensorsCheckpoint ckpt, SafetensorsCheckpoint::Open(dir));
//   std::vector<float> w(128 * 128);
//   PAGEDKV_RETURN_IF_ERROR(ckpt.ReadF32("model.norm.weight", {128}, w.data()));
//
// Thread-compatible (read-only after Open).
#ifndef PAGEDKV_ENGINE_MODEL_FORMATS_SAFETENSORS_H_
#define PAGEDKV_ENGINE_MODEL_FORMATS_SAFETENSORS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/model/formats/mapped_file.h"
#include "pagedkv/export.h"

namespace pagedkv::model_internal {

struct PAGEDKV_EXPORT SafetensorsTensor {
  std::string dtype;           // "F32", "F16", "BF16", ... (validated)
  std::vector<int64_t> shape;  // row-major
  int64_t num_elements = 0;
  int64_t begin = 0;  // absolute byte offset of the data in the file
  int64_t bytes = 0;  // data length
};

class PAGEDKV_EXPORT SafetensorsFile {
 public:
  // Maps and validates `path` (see the banner).
  static absl::StatusOr<SafetensorsFile> Open(const std::string& path);

  // Null when the file has no tensor `name`.
  const SafetensorsTensor* Find(const std::string& name) const;
  const absl::flat_hash_map<std::string, SafetensorsTensor>& tensors() const { return tensors_; }
  // The "__metadata__" strings (empty when absent).
  const absl::flat_hash_map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return file_.path(); }

  // Converts `tensor` (F32, F16 or BF16) to fp32 into out[0, num_elements).
  // InvalidArgument naming the file and tensor for another dtype.
  // REQUIRES: tensor is one of this file's; out holds num_elements floats.
  absl::Status ReadF32(const std::string& name, const SafetensorsTensor& tensor, float* out) const;
  // The stored bytes of `tensor`, valid while this file lives. REQUIRES: tensor is one of this
  // file's.
  std::string_view Data(const SafetensorsTensor& tensor) const {
    return file_.bytes().substr(static_cast<size_t>(tensor.begin),
                                static_cast<size_t>(tensor.bytes));
  }

 private:
  explicit SafetensorsFile(MappedFile file) : file_(std::move(file)) {}
  absl::Status ParseHeader();

  MappedFile file_;
  absl::flat_hash_map<std::string, SafetensorsTensor> tensors_;
  absl::flat_hash_map<std::string, std::string> metadata_;
};

class PAGEDKV_EXPORT SafetensorsCheckpoint {
 public:
  // `dir`/model.safetensors.index.json when present (its "weight_map" names each tensor's
  // shard, which must hold it), else `dir`/model.safetensors. NotFound when neither exists.
  static absl::StatusOr<SafetensorsCheckpoint> Open(const std::string& dir);

  bool Has(const std::string& name) const { return where_.contains(name); }
  const std::string& dir() const { return dir_; }
  // The tensor `name`, or null when absent.
  const SafetensorsTensor* Find(const std::string& name) const;

  // Checks that `name` exists with `shape` and converts it into out[0, product(shape)).
  // InvalidArgument naming the file and tensor for a missing tensor, another shape or an
  // unsupported dtype.
  absl::Status ReadF32(const std::string& name, absl::Span<const int64_t> shape, float* out) const;

  // The tensor `name` after the same checks as ReadF32 (present, with `shape`), and its stored
  // bytes, both valid while this checkpoint lives.
  absl::StatusOr<std::pair<const SafetensorsTensor*, std::string_view>> Stored(
      const std::string& name, absl::Span<const int64_t> shape) const;

  // Every tensor name (for refusing unexpected tensors).
  std::vector<std::string> Names() const;

 private:
  // The directory (for errors that name no single file) and the files.
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  absl::flat_hash_map<std::string, const SafetensorsFile*> where_;
};

}  // namespace pagedkv::model_internal

#endif  // PAGEDKV_ENGINE_MODEL_FORMATS_SAFETENSORS_H_
