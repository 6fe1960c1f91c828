// Copyright 2026 The pagedkv Authors.
//
// GgufFile: one memory-mapped GGUF file (llama.cpp's checkpoint format, versions 2 and 3) with a
// validated header, metadata and tensor directory.
//
// Layout (little-endian; https://github.com/ggml-org/ggml/blob/master/docs/gguf.md):
//   u32 magic "GGUF", u32 version, u64 tensor_count, u64 metadata_kv_count;
//   metadata_kv_count x (string key, u32 value_type, value), where a string is u64 length + bytes
//   and an array is u32 element type, u64 count, elements (arrays may nest);
//   tensor_count x (string name, u32 n_dims, n_dims x u64 ne, u32 ggml_type, u64 offset);
//   padding to general.alignment (u32, default 32), then the data; each tensor's offset is
//   relative to the data start and a multiple of the alignment. ne[0] varies fastest, so a
//   tensor with ne = {cols, rows} is row-major [rows, cols].
// Open() checks everything with checked arithmetic: counts against the bytes left, strings and
// arrays inside the file, known value and tensor types, 1..4 positive dims, ne[0] a whole
// number of blocks, arrays of at most 2^22 elements, aligned offsets, data inside the file, no
// overlapping tensors, no duplicate keys or names. Errors are InvalidArgument naming the file and
// the key or tensor.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(GgufFile f, GgufFile::Open("model.gguf"));
//   PAGEDKV_ASSIGN_OR_RETURN(int64_t layers, f.GetInt("llama.block_count"));
//   const GgufTensorInfo* emb = f.FindTensor("token_embd.weight");
//   std::vector<float> w(emb->num_elements);
//   PAGEDKV_RETURN_IF_ERROR(f.ReadF32(*emb, w.data()));
//
// Thread-compatible (read-only after Open).
#ifndef PAGEDKV_ENGINE_MODEL_FORMATS_GGUF_FILE_H_
#define PAGEDKV_ENGINE_MODEL_FORMATS_GGUF_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/model/formats/mapped_file.h"
#include "pagedkv/export.h"

namespace pagedkv::model_internal {

class GgufReader;  // the byte cursor of gguf_file.cc

// GGUF metadata value types (gguf_type).
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// "UINT8", ..., "FLOAT64"; "?" for a value outside the enum.
PAGEDKV_EXPORT const char* GgufValueTypeName(GgufValueType type);

// One metadata value. Integers keep their sign in `i` (signed types) or `u` (unsigned types and
// bool), floats in `f`; arrays hold their elements (all of `element_type`).
struct PAGEDKV_EXPORT GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0.0;
  std::string s;
  GgufValueType element_type = GgufValueType::kUint8;  // arrays only
  std::vector<GgufValue> elements;                     // arrays only
};

struct PAGEDKV_EXPORT GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // ne[0] fastest
  uint32_t type = 0;        // ggml_type
  int64_t num_elements = 0;
  int64_t begin = 0;  // absolute byte offset in the file
  int64_t bytes = 0;  // data length
};

class PAGEDKV_EXPORT GgufFile {
 public:
  // Maps and validates `path` (see the banner). NotFound when it cannot be opened.
  static absl::StatusOr<GgufFile> Open(const std::string& path);

  // True when the file at `path` starts with the GGUF magic (reads 4 bytes).
  static bool HasMagic(const std::string& path);

  uint32_t version() const { return version_; }
  int64_t alignment() const { return alignment_; }
  const std::string& path() const { return file_->path(); }

  // Null when there is no key `key`.
  const GgufValue* Find(absl::string_view key) const;
  // The value of `key` as an integer (any integer type; bool is not one); InvalidArgument naming
  // the key when absent, of another type or outside int64.
  absl::StatusOr<int64_t> GetInt(absl::string_view key) const;
  // Any float or integer type.
  absl::StatusOr<double> GetFloat(absl::string_view key) const;
  absl::StatusOr<std::string> GetString(absl::string_view key) const;
  absl::StatusOr<bool> GetBool(absl::string_view key) const;
  // An array of `element` type; InvalidArgument naming the key otherwise.
  absl::StatusOr<const std::vector<GgufValue>*> GetArray(absl::string_view key,
                                                         GgufValueType element) const;
  const std::vector<std::string>& keys() const { return keys_; }  // in file order

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }  // in file order
  const GgufTensorInfo* FindTensor(absl::string_view name) const;
  // The tensor's raw bytes (inside the mapping).
  std::string_view TensorBytes(const GgufTensorInfo& t) const;
  // The whole file's bytes (the mapping; the metadata above was parsed out of them at Open).
  std::string_view bytes() const { return file_->bytes(); }
  // Shares the mapping: TensorBytes stay valid while a copy of this lives, also after this
  // GgufFile is gone (ModelWeights keeps GGUF matrices in place this way).
  std::shared_ptr<const void> mapping() const { return file_; }
  // Converts the tensor to fp32 into out[0, num_elements); InvalidArgument naming the file and
  // tensor for an unsupported type. REQUIRES: t is one of this file's; out holds num_elements.
  absl::Status ReadF32(const GgufTensorInfo& t, float* out) const;

 private:
  explicit GgufFile(MappedFile file) : file_(std::make_shared<const MappedFile>(std::move(file))) {}
  absl::Status Parse();
  absl::Status ParseTensorInfos(GgufReader& r, int64_t count);
  absl::Status PlaceTensors(int64_t data_start);

  std::shared_ptr<const MappedFile> file_;  // never null
  uint32_t version_ = 0;
  int64_t alignment_ = 32;
  std::vector<std::string> keys_;
  absl::flat_hash_map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  absl::flat_hash_map<std::string, size_t> tensor_index_;
};

}  // namespace pagedkv::model_internal

#endif  // PAGEDKV_ENGINE_MODEL_FORMATS_GGUF_FILE_H_
