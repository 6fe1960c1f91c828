// Copyright 2026 The pagedkv Authors.
//
// DiskTier's named saves (Pin, HasPin; pagedkv/tiers/disk_tier.h): hard links under
// "<model>/names/<name>/", indexed in DiskTier::Impl::pinned.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "cache/tiers/disk/disk_files.h"
#include "cache/tiers/disk/disk_tier_impl.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/tiers/disk_tier.h"

namespace pagedkv {
namespace {

absl::Status CheckName(std::string_view name) {
  bool ok = !name.empty() && name.size() <= 128 && name.front() != '.';
  for (char c : name) ok = ok && (absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-');
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("save name '", std::string(name),
                   "': use 1-128 letters, digits, '.', '_' or '-', not starting with '.'"));
}

}  // namespace

// Links the leading run of `chain` the tier holds into folder `dir`; returns the hashes linked.
// A block whose file was evicted is first restored from an earlier save that holds it.
absl::StatusOr<std::vector<BlockHash>> DiskTier::Impl::LinkChain(const std::string& dir,
                                                                 std::span<const BlockHash> chain) {
  std::vector<BlockHash> linked;
  for (const BlockHash& h : chain) {
    const std::string from = ValuePath(model_dir, h);
    const std::string to = absl::StrCat(dir, "/", ValueFileName(h));
    bool ok = ::link(from.c_str(), to.c_str()) == 0;
    if (!ok && errno == ENOENT) {  // evicted: an earlier save may hold it
      std::string saved;
      {
        std::lock_guard lock(mu);
        auto it = pinned.find(h);
        if (it != pinned.end()) saved = SavePath(it->second, h);
      }
      ok = !saved.empty() && ::link(saved.c_str(), to.c_str()) == 0;
      if (!ok && saved.empty()) errno = ENOENT;
    }
    if (!ok && errno == ENOENT) break;  // the tier does not hold it: the save ends here
    if (!ok) return absl::ErrnoToStatus(errno, absl::StrCat("cannot link ", to));
    linked.push_back(h);
  }
  return linked;
}

absl::StatusOr<int64_t> DiskTier::Pin(std::string_view name, std::span<const BlockHash> chain) {
  PAGEDKV_RETURN_IF_ERROR(CheckName(name));
  Flush();
  const std::string dir = absl::StrCat(impl_->NamesDir(), "/", std::string(name));
  // Built beside the old save and renamed over it: the old save's links stay usable until then.
  const std::string building =
      absl::StrCat(impl_->NamesDir(), "/.", std::string(name), ".", ::getpid(), ".building");
  std::error_code ec;
  std::filesystem::remove_all(building, ec);
  PAGEDKV_RETURN_IF_ERROR(MakeDirectories(building));
  absl::StatusOr<std::vector<BlockHash>> linked = impl_->LinkChain(building, chain);
  std::filesystem::remove_all(dir, ec);
  if (linked.ok() && ::rename(building.c_str(), dir.c_str()) != 0) {
    linked = absl::ErrnoToStatus(errno, absl::StrCat("cannot rename ", building, " to ", dir));
  }
  std::filesystem::remove_all(building, ec);  // left only after a failure
  std::lock_guard lock(impl_->mu);
  absl::erase_if(impl_->pinned, [&](const auto& entry) { return entry.second == name; });
  if (linked.ok()) {
    for (const BlockHash& h : *linked) impl_->pinned[h] = std::string(name);
  }
  impl_->disk.pinned_blocks = static_cast<int64_t>(impl_->pinned.size());
  if (!linked.ok()) return linked.status();
  return static_cast<int64_t>(linked->size());
}

bool DiskTier::HasPin(std::string_view name) const {
  if (!CheckName(name).ok()) return false;
  struct stat st;
  const std::string dir = absl::StrCat(impl_->NamesDir(), "/", std::string(name));
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  impl_->IndexSave(std::string(name));
  return true;
}

std::string DiskTier::Impl::SavePath(const std::string& name, const BlockHash& hash) const {
  return absl::StrCat(NamesDir(), "/", name, "/", ValueFileName(hash));
}

namespace {

// The hashes of the value files in folder `dir` (a save's links); none when it cannot be read.
std::vector<BlockHash> SaveHashes(const std::filesystem::path& dir) {
  std::error_code ec;
  std::vector<BlockHash> hashes;
  for (const auto& file : std::filesystem::directory_iterator(dir, ec)) {
    const std::optional<BlockHash> h = ParseValueFileName(file.path().filename().string());
    if (h.has_value()) hashes.push_back(*h);
  }
  return hashes;
}

}  // namespace

void DiskTier::Impl::ScanPinned() {
  std::error_code ec;
  for (const auto& save : std::filesystem::directory_iterator(NamesDir(), ec)) {
    const std::string name = save.path().filename().string();
    if (save.is_directory(ec) && CheckName(name).ok()) IndexSave(name);  // not a save being built
  }
}

void DiskTier::Impl::IndexSave(const std::string& name) {
  const std::vector<BlockHash> hashes = SaveHashes(absl::StrCat(NamesDir(), "/", name));
  std::lock_guard lock(mu);
  for (const BlockHash& h : hashes) pinned.emplace(h, name);
  disk.pinned_blocks = static_cast<int64_t>(pinned.size());
}

}  // namespace pagedkv
