// Copyright 2026 The pagedkv Authors.
//
// GGUF parsing (see gguf_file.h): a bounds-checked little-endian cursor, the metadata values,
// the tensor directory and its placement in the data section.
#include "engine/model/formats/gguf_file.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/model/formats/gguf_dequant.h"
#include "pagedkv/checked_math.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::model_internal {

// Reads little-endian fields from the file's bytes; every read checks the bytes left.
class GgufReader {
 public:
  GgufReader(std::string_view bytes, const std::string& path) : bytes_(bytes), path_(path) {}

  absl::Status Bad(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF file '", path_, "': ", what, " (at byte ", pos_, ")"));
  }
  int64_t pos() const { return static_cast<int64_t>(pos_); }
  int64_t left() const { return static_cast<int64_t>(bytes_.size() - pos_); }

  template <typename T>
  absl::StatusOr<T> Read(absl::string_view what) {
    if (left() < static_cast<int64_t>(sizeof(T))) {
      return Bad(absl::StrCat(what, " runs past the end of the file"));
    }
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  absl::StatusOr<std::string> ReadString(absl::string_view what) {
    PAGEDKV_ASSIGN_OR_RETURN(uint64_t n, Read<uint64_t>(what));
    if (n > static_cast<uint64_t>(left())) {
      return Bad(absl::StrCat(what, ": string length ", n, " runs past the end of the file"));
    }
    std::string s(bytes_.substr(pos_, n));
    pos_ += n;
    return s;
  }

 private:
  std::string_view bytes_;
  const std::string& path_;
  size_t pos_ = 0;
};

namespace {

constexpr int kMaxArrayDepth = 4;  // nesting accepted in metadata arrays
constexpr int kMaxDims = 4;        // GGML_MAX_DIMS
// Elements accepted in one metadata array (tokenizers have up to ~300K tokens or merges); a
// larger count is refused before anything is allocated for it.
constexpr uint64_t kMaxArrayElements = uint64_t{1} << 22;

// Fewest bytes one value of `t` takes in the file (guards counts before allocating).
int64_t MinBytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kArray:
      return 12;
    default:
      return 8;  // string length, 64-bit types
  }
}

bool KnownType(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::kFloat64); }

absl::Status ReadValue(GgufReader& r, GgufValueType type, const std::string& key, int depth,
                       GgufValue* v);

absl::Status ReadArray(GgufReader& r, const std::string& key, int depth, GgufValue* v) {
  if (depth >= kMaxArrayDepth) return r.Bad(absl::StrCat("key '", key, "': arrays nest too deep"));
  PAGEDKV_ASSIGN_OR_RETURN(uint32_t et, r.Read<uint32_t>(absl::StrCat("key '", key, "'")));
  if (!KnownType(et)) {
    return r.Bad(absl::StrCat("key '", key, "': unknown array element type ", et));
  }
  v->element_type = static_cast<GgufValueType>(et);
  PAGEDKV_ASSIGN_OR_RETURN(uint64_t n, r.Read<uint64_t>(absl::StrCat("key '", key, "'")));
  if (n > kMaxArrayElements) {
    return r.Bad(absl::StrCat("key '", key, "': array of ", n, " elements is longer than the ",
                              kMaxArrayElements, " this reader accepts"));
  }
  if (n > static_cast<uint64_t>(r.left() / MinBytes(v->element_type))) {
    return r.Bad(absl::StrCat("key '", key, "': array of ", n, " ",
                              GgufValueTypeName(v->element_type),
                              " runs past the end of the file"));
  }
  v->elements.resize(n);
  for (GgufValue& e : v->elements) {
    PAGEDKV_RETURN_IF_ERROR(ReadValue(r, v->element_type, key, depth + 1, &e));
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status ReadNumber(GgufReader& r, const std::string& key, GgufValue* v) {
  PAGEDKV_ASSIGN_OR_RETURN(T x, r.Read<T>(absl::StrCat("key '", key, "'")));
  if constexpr (std::is_floating_point_v<T>) {
    v->f = static_cast<double>(x);
  } else if constexpr (std::is_signed_v<T>) {
    v->i = static_cast<int64_t>(x);
  } else {
    v->u = static_cast<uint64_t>(x);
  }
  return absl::OkStatus();
}

absl::Status ReadValue(GgufReader& r, GgufValueType type, const std::string& key, int depth,
                       GgufValue* v) {
  v->type = type;
  switch (type) {
    case GgufValueType::kUint8:
      return ReadNumber<uint8_t>(r, key, v);
    case GgufValueType::kInt8:
      return ReadNumber<int8_t>(r, key, v);
    case GgufValueType::kUint16:
      return ReadNumber<uint16_t>(r, key, v);
    case GgufValueType::kInt16:
      return ReadNumber<int16_t>(r, key, v);
    case GgufValueType::kUint32:
      return ReadNumber<uint32_t>(r, key, v);
    case GgufValueType::kInt32:
      return ReadNumber<int32_t>(r, key, v);
    case GgufValueType::kUint64:
      return ReadNumber<uint64_t>(r, key, v);
    case GgufValueType::kInt64:
      return ReadNumber<int64_t>(r, key, v);
    case GgufValueType::kFloat32:
      return ReadNumber<float>(r, key, v);
    case GgufValueType::kFloat64:
      return ReadNumber<double>(r, key, v);
    case GgufValueType::kBool: {
      PAGEDKV_RETURN_IF_ERROR(ReadNumber<uint8_t>(r, key, v));
      if (v->u > 1) return r.Bad(absl::StrCat("key '", key, "': bool value ", v->u));
      return absl::OkStatus();
    }
    case GgufValueType::kString: {
      PAGEDKV_ASSIGN_OR_RETURN(v->s, r.ReadString(absl::StrCat("key '", key, "'")));
      return absl::OkStatus();
    }
    case GgufValueType::kArray:
      return ReadArray(r, key, depth, v);
  }
  return r.Bad(absl::StrCat("key '", key, "': unknown value type"));
}

absl::Status BadKey(const std::string& path, absl::string_view key, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("GGUF file '", path, "': key '", key, "' ", what));
}

}  // namespace

const char* GgufValueTypeName(GgufValueType type) {
  static constexpr const char* kNames[] = {"UINT8",  "INT8",    "UINT16", "INT16",  "UINT32",
                                           "INT32",  "FLOAT32", "BOOL",   "STRING", "ARRAY",
                                           "UINT64", "INT64",   "FLOAT64"};
  const auto i = static_cast<uint32_t>(type);
  return i < std::size(kNames) ? kNames[i] : "?";
}

bool GgufFile::HasMagic(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

absl::StatusOr<GgufFile> GgufFile::Open(const std::string& path) {
  PAGEDKV_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::Open(path));
  GgufFile file(std::move(mapped));
  PAGEDKV_RETURN_IF_ERROR(file.Parse());
  return file;
}

absl::Status GgufFile::Parse() {
  GgufReader r(file_->bytes(), file_->path());
  PAGEDKV_ASSIGN_OR_RETURN(uint32_t magic, r.Read<uint32_t>("the magic"));
  if (magic != 0x46554747u) return r.Bad("does not start with the magic \"GGUF\"");
  PAGEDKV_ASSIGN_OR_RETURN(version_, r.Read<uint32_t>("the version"));
  if (version_ != 2 && version_ != 3) {
    return r.Bad(absl::StrCat("version ", version_, " is not supported (2 and 3 are)"));
  }
  PAGEDKV_ASSIGN_OR_RETURN(uint64_t n_tensors, r.Read<uint64_t>("the tensor count"));
  PAGEDKV_ASSIGN_OR_RETURN(uint64_t n_kv, r.Read<uint64_t>("the metadata count"));
  if (n_kv > static_cast<uint64_t>(r.left() / 13) ||
      n_tensors > static_cast<uint64_t>(r.left() / 24)) {
    return r.Bad(
        absl::StrCat(n_kv, " metadata keys and ", n_tensors, " tensors cannot fit in the file"));
  }
  for (uint64_t k = 0; k < n_kv; ++k) {
    PAGEDKV_ASSIGN_OR_RETURN(std::string key, r.ReadString(absl::StrCat("metadata key #", k)));
    if (metadata_.contains(key)) return r.Bad(absl::StrCat("key '", key, "' appears twice"));
    PAGEDKV_ASSIGN_OR_RETURN(uint32_t type, r.Read<uint32_t>(absl::StrCat("key '", key, "'")));
    if (!KnownType(type)) return r.Bad(absl::StrCat("key '", key, "': unknown value type ", type));
    GgufValue v;
    PAGEDKV_RETURN_IF_ERROR(ReadValue(r, static_cast<GgufValueType>(type), key, 0, &v));
    metadata_.emplace(key, std::move(v));
    keys_.push_back(std::move(key));
  }
  if (Find("general.alignment") != nullptr) {
    const GgufValue& a = *Find("general.alignment");
    if (a.type != GgufValueType::kUint32 || a.u == 0 || (a.u & (a.u - 1)) != 0) {
      return BadKey(path(), "general.alignment", "must be a UINT32 power of two");
    }
    alignment_ = static_cast<int64_t>(a.u);
  }
  PAGEDKV_RETURN_IF_ERROR(ParseTensorInfos(r, static_cast<int64_t>(n_tensors)));
  const int64_t data_start = (r.pos() + alignment_ - 1) / alignment_ * alignment_;
  return PlaceTensors(data_start);
}

absl::Status GgufFile::ParseTensorInfos(GgufReader& r, int64_t count) {
  for (int64_t t = 0; t < count; ++t) {
    GgufTensorInfo info;
    PAGEDKV_ASSIGN_OR_RETURN(info.name, r.ReadString(absl::StrCat("tensor #", t, "'s name")));
    const std::string what = absl::StrCat("tensor '", info.name, "'");
    if (tensor_index_.contains(info.name)) return r.Bad(absl::StrCat(what, " appears twice"));
    PAGEDKV_ASSIGN_OR_RETURN(uint32_t n_dims, r.Read<uint32_t>(what));
    if (n_dims < 1 || n_dims > kMaxDims) {
      return r.Bad(absl::StrCat(what, " has ", n_dims, " dims (1 to 4 are allowed)"));
    }
    info.num_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      PAGEDKV_ASSIGN_OR_RETURN(uint64_t ne, r.Read<uint64_t>(what));
      if (ne == 0 || ne > static_cast<uint64_t>(INT64_MAX) ||
          !CheckedMul(info.num_elements, static_cast<int64_t>(ne), &info.num_elements)) {
        return r.Bad(absl::StrCat(what, ": dim ", d, " = ", ne, " is zero or overflows"));
      }
      info.ne.push_back(static_cast<int64_t>(ne));
    }
    PAGEDKV_ASSIGN_OR_RETURN(info.type, r.Read<uint32_t>(what));
    absl::StatusOr<const GgufTypeTraits*> traits = GgufTypeInfo(info.type);
    if (!traits.ok()) return r.Bad(absl::StrCat(what, ": ", traits.status().message()));
    if (info.ne[0] % (*traits)->block_values != 0) {
      return r.Bad(absl::StrCat(what, ": row length ", info.ne[0], " is not a multiple of ",
                                (*traits)->name, "'s block of ", (*traits)->block_values));
    }
    info.bytes = info.num_elements / (*traits)->block_values;
    if (!CheckedMul(info.bytes, (*traits)->block_bytes, &info.bytes)) {
      return r.Bad(absl::StrCat(what, ": byte size overflows"));
    }
    PAGEDKV_ASSIGN_OR_RETURN(uint64_t offset, r.Read<uint64_t>(what));
    if (offset > static_cast<uint64_t>(INT64_MAX) || offset % static_cast<uint64_t>(alignment_)) {
      return r.Bad(absl::StrCat(what, ": offset ", offset, " is not a multiple of the alignment ",
                                alignment_));
    }
    info.begin = static_cast<int64_t>(offset);  // relative until PlaceTensors
    tensor_index_.emplace(info.name, tensors_.size());
    tensors_.push_back(std::move(info));
  }
  return absl::OkStatus();
}

absl::Status GgufFile::PlaceTensors(int64_t data_start) {
  const auto size = static_cast<int64_t>(file_->bytes().size());
  std::vector<const GgufTensorInfo*> order;
  for (GgufTensorInfo& t : tensors_) {
    int64_t end = 0;
    if (!CheckedAdd(t.begin, data_start, &t.begin) || !CheckedAdd(t.begin, t.bytes, &end) ||
        end > size) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "GGUF file '%s': tensor '%s' (%d bytes at data offset %d) runs past the end of the "
          "file (%d bytes; is it truncated?)",
          path(), t.name, t.bytes, t.begin - data_start, size));
    }
    order.push_back(&t);
  }
  std::sort(order.begin(), order.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < order.size(); ++i) {
    if (order[i - 1]->begin + order[i - 1]->bytes > order[i]->begin) {
      return absl::InvalidArgumentError(
          absl::StrFormat("GGUF file '%s': tensors '%s' and '%s' overlap", path(),
                          order[i - 1]->name, order[i]->name));
    }
  }
  return absl::OkStatus();
}

const GgufValue* GgufFile::Find(absl::string_view key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

absl::StatusOr<int64_t> GgufFile::GetInt(absl::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return BadKey(path(), key, "is missing");
  switch (v->type) {
    case GgufValueType::kInt8:
    case GgufValueType::kInt16:
    case GgufValueType::kInt32:
    case GgufValueType::kInt64:
      return v->i;
    case GgufValueType::kUint8:
    case GgufValueType::kUint16:
    case GgufValueType::kUint32:
    case GgufValueType::kUint64:
      if (v->u > static_cast<uint64_t>(INT64_MAX)) return BadKey(path(), key, "exceeds INT64");
      return static_cast<int64_t>(v->u);
    default:
      return BadKey(path(), key,
                    absl::StrCat("must be an integer, not ", GgufValueTypeName(v->type)));
  }
}

absl::StatusOr<double> GgufFile::GetFloat(absl::string_view key) const {
  const GgufValue* v = Find(key);
  if (v != nullptr && (v->type == GgufValueType::kFloat32 || v->type == GgufValueType::kFloat64)) {
    return v->f;
  }
  if (v != nullptr && v->type != GgufValueType::kBool && v->type != GgufValueType::kString &&
      v->type != GgufValueType::kArray) {
    PAGEDKV_ASSIGN_OR_RETURN(int64_t i, GetInt(key));
    return static_cast<double>(i);
  }
  return BadKey(path(), key, v == nullptr ? "is missing" : "must be a number");
}

absl::StatusOr<std::string> GgufFile::GetString(absl::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return BadKey(path(), key, "is missing");
  if (v->type != GgufValueType::kString) return BadKey(path(), key, "must be a STRING");
  return v->s;
}

absl::StatusOr<bool> GgufFile::GetBool(absl::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return BadKey(path(), key, "is missing");
  if (v->type != GgufValueType::kBool) return BadKey(path(), key, "must be a BOOL");
  return v->u != 0;
}

absl::StatusOr<const std::vector<GgufValue>*> GgufFile::GetArray(absl::string_view key,
                                                                 GgufValueType element) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return BadKey(path(), key, "is missing");
  if (v->type != GgufValueType::kArray || v->element_type != element) {
    return BadKey(path(), key, absl::StrCat("must be an ARRAY of ", GgufValueTypeName(element)));
  }
  return &v->elements;
}

const GgufTensorInfo* GgufFile::FindTensor(absl::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::string_view GgufFile::TensorBytes(const GgufTensorInfo& t) const {
  return file_->bytes().substr(static_cast<size_t>(t.begin), static_cast<size_t>(t.bytes));
}

absl::Status GgufFile::ReadF32(const GgufTensorInfo& t, float* out) const {
  absl::Status st = DequantizeGguf(t.type, TensorBytes(t), t.num_elements, out);
  if (st.ok()) return st;
  return absl::InvalidArgumentError(
      absl::StrCat("GGUF file '", path(), "': tensor '", t.name, "': ", st.message()));
}

}  // namespace pagedkv::model_internal
