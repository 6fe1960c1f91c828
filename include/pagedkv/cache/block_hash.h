// Copyright 2026 The pagedkv Authors.
//
// Block hashing: 128-bit hashes of token blocks chained from position 0.
//
// A prompt is cut into blocks of `block_size` tokens; only full blocks are hashed. Block i's hash
// covers its parent's hash, so equal hashes mean equal prefixes (up to hash collisions, which the
// KvCacheManager guards against by comparing tokens):
//
//   root = RootHash(cache_salt, model_fingerprint)
//   h[0] = HashBlock(hasher, root,   tokens[0 .. bs),      extra keys of block 0)
//   h[i] = HashBlock(hasher, h[i-1], tokens[i*bs .. +bs),  extra keys of block i)
//
// Byte layout hashed by HashBlock (all integers little-endian):
//   parent.low (u64) ‖ parent.high (u64) ‖ tokens (i32 each, exactly one block)
//   ‖ adapter_id (u64, only when != 0) ‖ content hash (low u64, high u64) of every multimodal
//   input overlapping the block, in input order.
// The layout is unambiguous for a fixed block size (an adapter adds 8 bytes, a multimodal input
// 16).
//
// Byte layout hashed by RootHash (always XXH3-128 with seed 0, never the pluggable hasher, so
// different salts never share a root even under a test hasher that forces block collisions):
//   "pagedkv-root-v1" (15 ASCII bytes) ‖ u64 len(fingerprint) ‖ fingerprint ‖ u64 len(salt) ‖ salt
// RootHash("", "") == kEmptyRootHash, a fixed value identical on every process and machine; an
// empty salt with a fingerprint F gives the equally fixed RootHash("", F).
//
// Example:
//   const pagedkv::BlockHasher& hasher = pagedkv::DefaultBlockHasher();  // XXH3-128
//   pagedkv::BlockHash root = pagedkv::RootHash(/*cache_salt=*/"", "llama2-7b|rope:...");
//   std::vector<pagedkv::TokenId> block0 = {...};  // exactly block_size tokens
//   pagedkv::BlockHash h0 = pagedkv::HashBlock(hasher, root, block0);
//   absl::flat_hash_map<pagedkv::BlockHash, int, pagedkv::BlockHashMix> index;
#ifndef PAGEDKV_CACHE_BLOCK_HASH_H_
#define PAGEDKV_CACHE_BLOCK_HASH_H_

#include <compare>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "pagedkv/export.h"
#include "pagedkv/types.h"

namespace pagedkv {

// A 128-bit block hash. Value type; `{}` is all zeros (not a valid hash of anything in practice).
struct PAGEDKV_EXPORT BlockHash {
  uint64_t low = 0;   // low 64 bits (XXH128_hash_t::low64)
  uint64_t high = 0;  // high 64 bits (XXH128_hash_t::high64)

  // A hash built from a 64-bit id, e.g. a Mooncake trace hash id: {id, 0}.
  static constexpr BlockHash FromU64(uint64_t id) { return BlockHash{id, 0}; }

  friend constexpr bool operator==(const BlockHash&, const BlockHash&) = default;
  // A total order (lexicographic on (low, high)) for ordered containers.
  friend constexpr auto operator<=>(const BlockHash&, const BlockHash&) = default;

  template <typename H>
  friend H AbslHashValue(H h, const BlockHash& b) {
    return H::combine(std::move(h), b.low, b.high);
  }

  // 32 lowercase hex digits, high word first (the usual way to print a 128-bit number).
  std::string ToString() const;
};

// A cheap, well-mixed hash functor for BlockHash keys in hash maps. Both words are mixed, so
// sequential 64-bit ids ({id, 0}) spread as well as real XXH3 hashes.
// Example: absl::flat_hash_map<BlockHash, BlockId, BlockHashMix> index;
struct PAGEDKV_EXPORT BlockHashMix {
  size_t operator()(const BlockHash& h) const {
    __extension__ using U128 = unsigned __int128;
    const U128 p = static_cast<U128>(h.low ^ 0x9e3779b97f4a7c15ULL) *
                   static_cast<U128>(h.high ^ 0xbf58476d1ce4e5b9ULL);
    return static_cast<size_t>(static_cast<uint64_t>(p) ^ static_cast<uint64_t>(p >> 64));
  }
};

// RootHash("", ""): the documented fixed root of an empty salt and an empty model fingerprint.
inline constexpr BlockHash kEmptyRootHash = {0x9b8b3963b8aa7facULL, 0x09dfb966edc9237eULL};

// Hashes byte strings into BlockHash values. The default is XXH3-128 (seed 0); tests plug a
// deliberately weak hasher to force collisions. Implementations must be deterministic and
// thread-compatible (const calls from several threads are safe).
class PAGEDKV_EXPORT BlockHasher {
 public:
  virtual ~BlockHasher() = default;
  // Returns the hash of `bytes`.
  virtual BlockHash Hash(std::span<const std::byte> bytes) const = 0;
};

// XXH3-128 with seed 0.
class PAGEDKV_EXPORT Xxh3BlockHasher final : public BlockHasher {
 public:
  BlockHash Hash(std::span<const std::byte> bytes) const override;
};

// A process-wide Xxh3BlockHasher (never destroyed).
PAGEDKV_EXPORT const BlockHasher& DefaultBlockHasher();

// Raw XXH3-128 (seed 0) of `bytes`; the building block of Xxh3BlockHasher and RootHash.
PAGEDKV_EXPORT BlockHash Xxh3Hash128(std::span<const std::byte> bytes);

// The chain root of a request: depends on the cache salt (requests with different salts never
// share blocks) and on the model fingerprint supplied by the engine (model id, RoPE configuration;
// caches shared between engines never mix models). See the byte layout above.
PAGEDKV_EXPORT BlockHash RootHash(std::string_view cache_salt, std::string_view model_fingerprint);

// A multimodal input (image, audio clip) occupying `length` placeholder tokens from token index
// `offset` of a request. Every block overlapping [offset, offset + length) hashes `content_hash`.
struct PAGEDKV_EXPORT MultimodalInput {
  int64_t offset = 0;      // first token index covered by the input (>= 0)
  int64_t length = 0;      // number of placeholder tokens (> 0)
  BlockHash content_hash;  // hash of the input's content (e.g. image bytes), computed by the engine
};

// Extra keys of one block, beyond its tokens.
struct PAGEDKV_EXPORT BlockExtraKeys {
  uint64_t adapter_id = 0;                     // LoRA adapter id; 0 = no adapter (not hashed)
  std::span<const BlockHash> multimodal = {};  // content hashes of inputs overlapping the block
};

// An exact-or-strong digest of a block's extra keys, stored beside cached blocks so verification
// compares extra keys as well as tokens: {adapter_id, 0} when there are no multimodal keys (so
// {0, 0} for none), else XXH3-128("pagedkv-extra-v1" ‖ adapter_id ‖ each content hash) with the
// high bit of `high` set (never equal to an adapter-only digest). Independent of any plugged
// hasher.
PAGEDKV_EXPORT BlockHash ExtraKeysDigest(const BlockExtraKeys& extra);

// Hashes one full block: `hasher`(parent ‖ tokens ‖ extra keys), byte layout as above.
// REQUIRES: tokens.size() is the block size (the function hashes whatever it is given).
BlockHash HashBlock(const BlockHasher& hasher, const BlockHash& parent,
                    std::span<const TokenId> tokens, const BlockExtraKeys& extra = {});

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_BLOCK_HASH_H_
