// Copyright 2026 The pagedkv Authors.
#include "engine/model/formats/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/model/formats/file_bytes.h"
#include "engine/model/formats/json_fields.h"
#include "pagedkv/kernels/dtype_convert.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::model_internal {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors files are little-endian; a big-endian host needs byte swapping");

// Largest header accepted (the reference implementation's limit is 100 MB).
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;

// Bytes per element of each safetensors dtype; 0 for an unknown name.
int64_t DTypeSize(const std::string& dtype) {
  static const auto* const kSizes = new absl::flat_hash_map<std::string, int64_t>{
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};
  auto it = kSizes->find(dtype);
  return it == kSizes->end() ? 0 : it->second;
}

absl::Status Bad(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrFormat("safetensors file '%s': %s", path, what));
}

// Elements of `shape`, or -1 when a dim is negative or the product overflows int64.
int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

// Reads one tensor entry of the header. `data_bytes` is the size of the data section.
absl::StatusOr<SafetensorsTensor> ParseEntry(const std::string& path, const std::string& name,
                                             const nlohmann::json& e, int64_t data_start,
                                             int64_t data_bytes) {
  const std::string where = absl::StrFormat("safetensors file '%s', tensor '%s'", path, name);
  if (!e.is_object()) return Bad(path, absl::StrFormat("tensor '%s' is not an object", name));
  SafetensorsTensor t;
  PAGEDKV_ASSIGN_OR_RETURN(t.dtype, RequiredString(e, "dtype", where));
  const int64_t size = DTypeSize(t.dtype);
  if (size == 0) {
    return Bad(path, absl::StrFormat("tensor '%s' has unknown dtype '%s'", name, t.dtype));
  }
  const nlohmann::json* shape = FindField(e, "shape");
  const nlohmann::json* offsets = FindField(e, "data_offsets");
  if (shape == nullptr || !shape->is_array() || offsets == nullptr || !offsets->is_array() ||
      offsets->size() != 2) {
    return Bad(path, absl::StrFormat("tensor '%s' needs a \"shape\" array and \"data_offsets\" "
                                     "[begin, end]",
                                     name));
  }
  for (const nlohmann::json& d : *shape) {
    if (!d.is_number_unsigned()) {
      return Bad(path, absl::StrFormat("tensor '%s' has a shape entry that is not a "
                                       "non-negative integer",
                                       name));
    }
    t.shape.push_back(d.get<uint64_t>() > uint64_t{1} << 62 ? -1 : d.get<int64_t>());
  }
  t.num_elements = NumElements(t.shape);
  const nlohmann::json &b = (*offsets)[0], &en = (*offsets)[1];
  if (t.num_elements < 0 || !b.is_number_unsigned() || !en.is_number_unsigned()) {
    return Bad(path, absl::StrFormat("tensor '%s' has a bad shape or data_offsets", name));
  }
  const uint64_t begin = b.get<uint64_t>(), end = en.get<uint64_t>();
  if (begin > end || end > static_cast<uint64_t>(data_bytes)) {
    return Bad(path, absl::StrFormat("tensor '%s' has data_offsets [%d, %d] outside the %d data "
                                     "bytes (truncated file?)",
                                     name, begin, end, data_bytes));
  }
  if (t.num_elements > std::numeric_limits<int64_t>::max() / size ||
      end - begin != static_cast<uint64_t>(t.num_elements * size)) {
    return Bad(path, absl::StrFormat("tensor '%s' has %d bytes of data but its shape [%s] of %s "
                                     "needs %d",
                                     name, end - begin, absl::StrJoin(t.shape, ", "), t.dtype,
                                     t.num_elements * size));
  }
  t.begin = data_start + static_cast<int64_t>(begin);
  t.bytes = static_cast<int64_t>(end - begin);
  return t;
}

absl::Status ParseMetadata(const std::string& path, const nlohmann::json& m,
                           absl::flat_hash_map<std::string, std::string>* out) {
  if (!m.is_object()) return Bad(path, "\"__metadata__\" must be an object of strings");
  for (auto it = m.begin(); it != m.end(); ++it) {
    if (!it.value().is_string()) {
      return Bad(path, absl::StrFormat("\"__metadata__\" entry '%s' is not a string", it.key()));
    }
    (*out)[it.key()] = it.value().get<std::string>();
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  PAGEDKV_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::Open(path));
  SafetensorsFile file(std::move(mapped));
  PAGEDKV_RETURN_IF_ERROR(file.ParseHeader());
  return file;
}

absl::Status SafetensorsFile::ParseHeader() {
  const std::string_view bytes = file_.bytes();
  const std::string& path = file_.path();
  if (bytes.size() < 8) return Bad(path, "shorter than the 8-byte header length");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > kMaxHeaderBytes || n > bytes.size() - 8) {
    return Bad(path, absl::StrFormat("header length %d does not fit in the file's %d bytes", n,
                                     bytes.size()));
  }
  PAGEDKV_ASSIGN_OR_RETURN(
      nlohmann::json header,
      ParseJson(bytes.substr(8, n), absl::StrCat("safetensors header of '", path, "'")));
  if (!header.is_object()) return Bad(path, "the header is not a JSON object");
  const auto data_start = static_cast<int64_t>(8 + n);
  const auto data_bytes = static_cast<int64_t>(bytes.size()) - data_start;
  std::vector<std::pair<int64_t, std::string>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      PAGEDKV_RETURN_IF_ERROR(ParseMetadata(path, it.value(), &metadata_));
      continue;
    }
    PAGEDKV_ASSIGN_OR_RETURN(SafetensorsTensor t,
                             ParseEntry(path, it.key(), it.value(), data_start, data_bytes));
    if (t.bytes > 0) ranges.emplace_back(t.begin, it.key());
    tensors_.emplace(it.key(), std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    const SafetensorsTensor& prev = tensors_.at(ranges[i - 1].second);
    if (prev.begin + prev.bytes > ranges[i].first) {
      return Bad(path, absl::StrFormat("tensors '%s' and '%s' overlap", ranges[i - 1].second,
                                       ranges[i].second));
    }
  }
  return absl::OkStatus();
}

const SafetensorsTensor* SafetensorsFile::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

absl::Status SafetensorsFile::ReadF32(const std::string& name, const SafetensorsTensor& t,
                                      float* out) const {
  const char* src = file_.bytes().data() + t.begin;
  if (t.dtype == "F32") {
    std::memcpy(out, src, static_cast<size_t>(t.bytes));
    return absl::OkStatus();
  }
  if (t.dtype != "F16" && t.dtype != "BF16") {
    return Bad(path(), absl::StrFormat("tensor '%s' has dtype %s; only F32, F16 and BF16 are "
                                       "supported",
                                       name, t.dtype));
  }
  const bool f16 = t.dtype == "F16";
  for (int64_t i = 0; i < t.num_elements; ++i) {
    uint16_t h = 0;
    std::memcpy(&h, src + 2 * i, 2);
    out[i] = f16 ? F16BitsToF32(h) : BF16BitsToF32(h);
  }
  return absl::OkStatus();
}

namespace {

// Shard file names of an index's "weight_map", each tensor with its file.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ReadIndex(
    const std::string& index_path) {
  PAGEDKV_ASSIGN_OR_RETURN(std::string text, ReadFileBytes(index_path, "safetensors index"));
  PAGEDKV_ASSIGN_OR_RETURN(nlohmann::json j, ParseJson(text, index_path));
  const nlohmann::json* map = j.is_object() ? FindField(j, "weight_map") : nullptr;
  if (map == nullptr || !map->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("'%s': needs a \"weight_map\" object of tensor name to file", index_path));
  }
  std::vector<std::pair<std::string, std::string>> entries;
  for (auto it = map->begin(); it != map->end(); ++it) {
    const nlohmann::json& v = it.value();
    if (!v.is_string() || v.get<std::string>().find('/') != std::string::npos ||
        v.get<std::string>().empty() || v.get<std::string>() == "..") {
      return absl::InvalidArgumentError(
          absl::StrFormat("'%s': weight_map entry '%s' must be a file name in the same directory",
                          index_path, it.key()));
    }
    entries.emplace_back(it.key(), v.get<std::string>());
  }
  return entries;
}

}  // namespace

absl::StatusOr<SafetensorsCheckpoint> SafetensorsCheckpoint::Open(const std::string& dir) {
  const std::filesystem::path root(dir);
  const std::filesystem::path index = root / "model.safetensors.index.json";
  const std::filesystem::path single = root / "model.safetensors";
  std::error_code ec;
  SafetensorsCheckpoint ckpt;
  ckpt.dir_ = dir;
  if (std::filesystem::exists(index, ec)) {
    PAGEDKV_ASSIGN_OR_RETURN(auto entries, ReadIndex(index.string()));
    absl::flat_hash_map<std::string, const SafetensorsFile*> by_file;
    for (const auto& [name, file] : entries) {
      const SafetensorsFile*& f = by_file[file];
      if (f == nullptr) {
        PAGEDKV_ASSIGN_OR_RETURN(SafetensorsFile opened,
                                 SafetensorsFile::Open((root / file).string()));
        ckpt.files_.push_back(std::make_unique<SafetensorsFile>(std::move(opened)));
        f = ckpt.files_.back().get();
      }
      if (f->Find(name) == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrFormat("'%s' lists tensor '%s' in '%s', which does not hold it",
                            index.string(), name, f->path()));
      }
      ckpt.where_[name] = f;
    }
    return ckpt;
  }
  if (!std::filesystem::exists(single, ec)) {
    return absl::NotFoundError(absl::StrFormat(
        "'%s' has neither model.safetensors nor model.safetensors.index.json", dir));
  }
  PAGEDKV_ASSIGN_OR_RETURN(SafetensorsFile opened, SafetensorsFile::Open(single.string()));
  ckpt.files_.push_back(std::make_unique<SafetensorsFile>(std::move(opened)));
  for (const auto& [name, t] : ckpt.files_.back()->tensors()) {
    ckpt.where_[name] = ckpt.files_.back().get();
  }
  return ckpt;
}

const SafetensorsTensor* SafetensorsCheckpoint::Find(const std::string& name) const {
  auto it = where_.find(name);
  return it == where_.end() ? nullptr : it->second->Find(name);
}

absl::Status SafetensorsCheckpoint::ReadF32(const std::string& name,
                                            absl::Span<const int64_t> shape, float* out) const {
  PAGEDKV_ASSIGN_OR_RETURN(auto stored, Stored(name, shape));
  return where_.at(name)->ReadF32(name, *stored.first, out);
}

absl::StatusOr<std::pair<const SafetensorsTensor*, std::string_view>> SafetensorsCheckpoint::Stored(
    const std::string& name, absl::Span<const int64_t> shape) const {
  auto it = where_.find(name);
  if (it == where_.end()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("safetensors checkpoint '%s': missing tensor '%s' (shape [%s])", dir_, name,
                        absl::StrJoin(shape, ", ")));
  }
  const SafetensorsTensor& t = *it->second->Find(name);
  if (!std::equal(t.shape.begin(), t.shape.end(), shape.begin(), shape.end())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "safetensors file '%s': tensor '%s' has shape [%s] but config.json implies [%s]",
        it->second->path(), name, absl::StrJoin(t.shape, ", "), absl::StrJoin(shape, ", ")));
  }
  return std::make_pair(&t, it->second->Data(t));
}

std::vector<std::string> SafetensorsCheckpoint::Names() const {
  std::vector<std::string> names;
  names.reserve(where_.size());
  for (const auto& [name, file] : where_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace pagedkv::model_internal
