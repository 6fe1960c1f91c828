// Copyright 2026 The pagedkv Authors.
//
// Bindings of the hash-level cache: BlockPool, ChunkIndex, the eviction policies (built-in names
// and the adapter that lets the pool call a policy written in Python) and the hash functions.
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common.h"
#include "events.h"
#include "pagedkv/cache/block_pool.h"
#include "pagedkv/cache/chunk_index.h"
#include "pagedkv/cache/eviction_policy.h"

namespace pagedkv::python {
namespace {

using py::arg;

// An EvictionPolicy that forwards every call to a Python object implementing
// pagedkv.EvictionPolicy (init, on_insert, on_access, on_release, on_remove, pick_victim, clear).
// An exception in a notification is reported through sys.unraisablehook; one in pick_victim (or a
// result that is not an int) makes it return kNullBlock, which the pool rejects with
// InternalError, so a broken policy never corrupts the pool.
class PythonPolicy final : public EvictionPolicy {
 public:
  explicit PythonPolicy(py::object impl) : impl_(std::move(impl)) {
    py::object name = py::getattr(impl_, "name", py::none());
    name_ = name.is_none() ? py::str(impl_.get_type().attr("__name__")).cast<std::string>()
                           : py::str(name).cast<std::string>();
  }
  ~PythonPolicy() override {
    py::gil_scoped_acquire gil;
    impl_ = py::object();
  }

  std::string_view Name() const override { return name_; }
  void Init(int32_t num_blocks) override { Notify("init", num_blocks); }
  void OnInsert(BlockId block, const BlockHash& hash) override { Notify("on_insert", block, hash); }
  void OnAccess(BlockId block, const BlockHash& hash) override { Notify("on_access", block, hash); }
  void OnRelease(BlockId block, const BlockHash& hash) override {
    Notify("on_release", block, hash);
  }
  void OnRemove(BlockId block, const BlockHash& hash) override { Notify("on_remove", block, hash); }
  void Clear() override { Notify("clear"); }

  BlockId PickVictim() override {
    py::gil_scoped_acquire gil;
    try {
      return impl_.attr("pick_victim")().cast<BlockId>();
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable(name_.c_str());
    } catch (const py::cast_error&) {
    }
    return kNullBlock;
  }

 private:
  template <typename... Args>
  void Notify(const char* method, Args&&... args) {
    py::gil_scoped_acquire gil;
    try {
      impl_.attr(method)(std::forward<Args>(args)...);
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable(name_.c_str());
    }
  }

  py::object impl_;
  std::string name_;
};

struct PyBlockPool {
  EventHub hub;                     // declared first: destroyed after the pool
  std::unique_ptr<BlockPool> pool;  // never null once constructed

  BlockPool& get() {
    hub.CheckNotInListener();
    return *pool;
  }
};

// A ChunkIndex over a Python BlockPool, which it keeps alive.
struct PyChunkIndex {
  py::object pool_owner;              // the PyBlockPool; released after the index
  std::unique_ptr<ChunkIndex> index;  // never null once constructed
};

// The arguments of BlockPool::Insert, kept in one place (the C++ signature is being changed to
// an argument struct; only this function needs porting).
struct InsertArgs {
  BlockId block = kNullBlock;
  BlockHash hash;
  BlockHash parent_hash;
  std::vector<TokenId> tokens;
  BlockId parent_block = kNullBlock;
  BlockHash extra_digest;
};

absl::StatusOr<bool> InsertBlock(BlockPool& pool, const InsertArgs& a) {
  return pool.Insert({.block = a.block,
                      .hash = a.hash,
                      .parent_hash = a.parent_hash,
                      .tokens = a.tokens,
                      .parent_block = a.parent_block,
                      .extra_digest = a.extra_digest});
}

void BindPoolLookups(py::class_<PyBlockPool>& c) {
  c.def(
       "find_cached",
       [](PyBlockPool& self, const BlockHash& hash) -> std::optional<BlockId> {
         const BlockId b = self.get().FindCached(hash);
         if (b == kNullBlock) return std::nullopt;
         return b;
       },
       arg("hash"), "The block cached under `hash`, or None.")
      .def(
          "tokens_match",
          [](PyBlockPool& self, BlockId b, std::vector<TokenId> tokens) {
            return self.get().TokensMatch(b, tokens);
          },
          arg("block"), arg("tokens"), "True when cached `block` holds exactly `tokens`.")
      .def(
          "ref_count", [](PyBlockPool& self, BlockId b) { return self.get().RefCount(b); },
          arg("block"), "Reference count; -1 when out of range.")
      .def(
          "is_cached", [](PyBlockPool& self, BlockId b) { return self.get().IsCached(b); },
          arg("block"), "True when `block` is in the hash index.")
      .def(
          "cached_hash", [](PyBlockPool& self, BlockId b) { return self.get().CachedHash(b); },
          arg("block"), "The hash `block` is cached under, or None.")
      .def(
          "parent_hash", [](PyBlockPool& self, BlockId b) { return self.get().ParentHash(b); },
          arg("block"), "The hash `block`'s chain continues from, or None.")
      .def(
          "cached_tokens",
          [](PyBlockPool& self, BlockId b) {
            std::span<const TokenId> t = self.get().CachedTokens(b);
            return std::vector<TokenId>(t.begin(), t.end());
          },
          arg("block"), "Stored tokens of cached `block` (a copy; empty when none).")
      .def(
          "generation", [](PyBlockPool& self, BlockId b) { return self.get().Generation(b); },
          arg("block"),
          "How many times `block` has been allocated (a stale handle's generation differs).")
      .def(
          "is_linked_to",
          [](PyBlockPool& self, BlockId child, std::optional<BlockId> parent) {
            return self.get().IsLinkedTo(child, parent.value_or(kNullBlock));
          },
          arg("child"), arg("parent"),
          "True when cached `child` chains from `parent` (None: from the root).")
      .def_property_readonly(
          "num_blocks", [](PyBlockPool& s) { return s.get().num_blocks(); }, "Blocks in the pool.")
      .def_property_readonly(
          "block_size", [](PyBlockPool& s) { return s.get().block_size(); }, "Tokens per block.")
      .def_property_readonly(
          "store_tokens", [](PyBlockPool& s) { return s.get().store_tokens(); },
          "Whether cached blocks keep their tokens (for verification).")
      .def_property_readonly(
          "num_free_blocks", [](PyBlockPool& s) { return s.get().NumFreeBlocks(); },
          "Blocks neither referenced nor cached.")
      .def_property_readonly(
          "num_evictable_blocks", [](PyBlockPool& s) { return s.get().NumEvictableBlocks(); },
          "Cached blocks with reference count 0 (reusable after eviction).")
      .def_property_readonly(
          "num_available_blocks", [](PyBlockPool& s) { return s.get().NumAvailableBlocks(); },
          "Free plus evictable blocks.")
      .def_property_readonly(
          "num_used_blocks", [](PyBlockPool& s) { return s.get().NumUsedBlocks(); },
          "Blocks with a reference count above 0.")
      .def_property_readonly(
          "num_cached_blocks", [](PyBlockPool& s) { return s.get().NumCachedBlocks(); },
          "Blocks in the hash index.")
      .def_property_readonly(
          "policy_name", [](PyBlockPool& s) { return std::string(s.get().policy().Name()); },
          "The eviction policy's name.")
      .def_property_readonly(
          "stats", [](PyBlockPool& s) { return s.get().stats(); },
          "The pool's counters (a CacheStats snapshot).")
      .def(
          "reset_stats", [](PyBlockPool& s) { s.get().ResetStats(); }, "Zeroes the counters.")
      .def(
          "validate_invariants", [](PyBlockPool& s) { CheckStatus(s.get().ValidateInvariants()); },
          "Raises InternalError when an internal invariant is broken.");
}

void BindPoolUpdates(py::class_<PyBlockPool>& c) {
  c.def(
       "pin", [](PyBlockPool& self, BlockId b) { CheckStatus(self.get().Pin(b)); }, arg("block"),
       "Adds a reference to `block` (a cached block leaves the eviction candidates).")
      .def(
          "unpin", [](PyBlockPool& self, BlockId b) { CheckStatus(self.get().Unpin(b)); },
          arg("block"),
          "Drops a reference to `block`; at 0 a cached block becomes evictable, an uncached one "
          "free.")
      .def(
          "unpin",
          [](PyBlockPool& self, std::vector<BlockId> blocks) {
            CheckStatus(self.get().Unpin(std::span<const BlockId>(blocks)));
          },
          arg("blocks"), "Unpins each block in order (a chain tail first); all or nothing.")
      .def(
          "allocate", [](PyBlockPool& self) { return Unwrap(self.get().Allocate()); },
          "A block with reference count 1 (may evict). ResourceExhaustedError when none.")
      .def(
          "allocate",
          [](PyBlockPool& self, int32_t count) {
            std::vector<BlockId> out;
            CheckStatus(self.get().Allocate(count, &out));
            return out;
          },
          arg("count"), "`count` blocks, all or nothing.")
      .def(
          "insert",
          [](PyBlockPool& self, BlockId block, BlockHash hash, BlockHash parent_hash,
             std::optional<std::vector<TokenId>> tokens, std::optional<BlockId> parent_block,
             std::optional<BlockHash> extra_digest) {
            return Unwrap(
                InsertBlock(self.get(), {.block = block,
                                         .hash = hash,
                                         .parent_hash = parent_hash,
                                         .tokens = tokens.value_or(std::vector<TokenId>{}),
                                         .parent_block = parent_block.value_or(kNullBlock),
                                         .extra_digest = extra_digest.value_or(BlockHash{})}));
          },
          arg("block"), arg("hash"), arg("parent_hash"), py::kw_only(), arg("tokens") = py::none(),
          arg("parent_block") = py::none(), arg("extra_digest") = py::none(),
          "Caches used, uncached `block` under `hash`; False when another block holds it.")
      .def(
          "uncache", [](PyBlockPool& self, BlockId b) { CheckStatus(self.get().Uncache(b)); },
          arg("block"),
          "Removes `block` from the hash index (it stays allocated while referenced).")
      .def(
          "reset_prefix_cache", [](PyBlockPool& self) { self.get().ResetPrefixCache(); },
          "Drops every cached hash; emits AllBlocksCleared.")
      .def(
          "take_events", [](PyBlockPool& self) { return self.hub.Take(); },
          "The KV events since the previous call, oldest first; empty without record_events=True.")
      .def(
          "add_event_listener",
          [](PyBlockPool& self, py::function fn) { return self.hub.AddListener(fn); },
          arg("listener"), "Calls listener(event) for every event as it happens; returns an id.")
      .def(
          "remove_event_listener",
          [](PyBlockPool& self, int id) { return self.hub.RemoveListener(id); }, arg("listener_id"),
          "Unregisters a listener by id; False when unknown.")
      .def("__repr__", [](PyBlockPool& self) {
        const BlockPool& p = self.get();
        return "BlockPool(num_blocks=" + std::to_string(p.num_blocks()) +
               ", block_size=" + std::to_string(p.block_size()) +
               ", policy=" + std::string(p.policy().Name()) +
               ", num_free_blocks=" + std::to_string(p.NumFreeBlocks()) +
               ", num_cached_blocks=" + std::to_string(p.NumCachedBlocks()) + ")";
      });
}

void BindBlockPool(py::module_& m) {
  py::class_<PyBlockPool> c(m, "BlockPool",
                            "KV blocks with reference counts and a hash -> block index. "
                            "Not thread-safe.");
  c.def(py::init([](int32_t num_blocks, int32_t block_size, bool store_tokens,
                    py::object eviction_policy, bool record_events) {
          BlockPoolOptions o{
              .num_blocks = num_blocks, .block_size = block_size, .store_tokens = store_tokens};
          std::unique_ptr<EvictionPolicy> policy =
              PolicyArgument(eviction_policy, &o.eviction_policy);
          auto out = std::make_unique<PyBlockPool>();
          out->pool = Unwrap(BlockPool::Create(o, std::move(policy)));
          out->hub.Attach(*out->pool, record_events);
          return out;
        }),
        py::kw_only(), arg("num_blocks"), arg("block_size") = 16, arg("store_tokens") = true,
        arg("eviction_policy") = "lru", arg("record_events") = false);
  BindPoolLookups(c);
  BindPoolUpdates(c);
}

void BindChunkIndex(py::module_& m) {
  py::class_<ChunkLocation> loc(m, "ChunkLocation", "Where a cached chunk's KV lives.");
  loc.def_readonly("key", &ChunkLocation::key, "The chunk's position-free content hash.")
      .def_readonly("blocks", &ChunkLocation::blocks,
                    "Blocks holding the chunk's tokens, in order.")
      .def_readonly("start_offset", &ChunkLocation::start_offset,
                    "Offset of the chunk's first token in its first block.")
      .def_readonly("num_tokens", &ChunkLocation::num_tokens, "Tokens of the chunk.")
      .def_readonly("position", &ChunkLocation::position,
                    "Position of the chunk's first token when its KV was computed.")
      .def(
          "slot_of",
          [](const ChunkLocation& l, int32_t i, int32_t block_size) {
            if (i < 0 || i >= l.num_tokens || block_size <= 0 ||
                (l.start_offset + i) / block_size >= static_cast<int32_t>(l.blocks.size())) {
              ThrowInvalidArgument("slot_of: token index " + std::to_string(i) +
                                   " outside the chunk's " + std::to_string(l.num_tokens) +
                                   " tokens, or a block size that does not fit its blocks");
            }
            return l.SlotOf(i, block_size);
          },
          arg("i"), arg("block_size"), "KV slot of the chunk's token `i` under `block_size`.")
      .def("position_of", &ChunkLocation::PositionOf, arg("i"),
           "Position token `i` of the chunk was computed at.");
  AddDataclassMethods(loc, {"key", "blocks", "start_offset", "num_tokens", "position"});

  py::class_<ChunkIndexStats> st(m, "ChunkIndexStats", "Counters of a ChunkIndex.");
  st.def_readonly("lookups", &ChunkIndexStats::lookups, "find calls.")
      .def_readonly("hits", &ChunkIndexStats::hits, "Finds that returned a chunk.")
      .def_readonly("hit_tokens", &ChunkIndexStats::hit_tokens, "Tokens of the chunks found.")
      .def_readonly("inserts", &ChunkIndexStats::inserts, "Chunks registered.")
      .def_readonly("invalidations", &ChunkIndexStats::invalidations,
                    "Chunks dropped because the pool dropped one of their blocks.")
      .def_readonly("orphans_freed", &ChunkIndexStats::orphans_freed,
                    "Copy blocks freed because their chunk was dropped.");
  AddDataclassMethods(
      st, {"lookups", "hits", "hit_tokens", "inserts", "invalidations", "orphans_freed"});

  py::class_<PyChunkIndex> c(m, "ChunkIndex",
                             "Cached chunks reusable at another position; shares a BlockPool.");
  c.def(py::init([](py::object pool, bool verify_tokens) {
          PyBlockPool& p = pool.cast<PyBlockPool&>();
          auto out = std::make_unique<PyChunkIndex>();
          out->index = Unwrap(ChunkIndex::Create(&p.get(), {.verify_tokens = verify_tokens}));
          out->pool_owner = std::move(pool);
          return out;
        }),
        arg("pool"), py::kw_only(), arg("verify_tokens") = true)
      .def(
          "insert",
          [](PyChunkIndex& s, BlockHash key, std::vector<TokenId> tokens, int32_t position,
             std::vector<BlockId> blocks, int32_t start_offset) {
            return Unwrap(s.index->Insert({.key = key,
                                           .tokens = tokens,
                                           .position = position,
                                           .blocks = blocks,
                                           .start_offset = start_offset}));
          },
          arg("key"), arg("tokens"), arg("position"), arg("blocks"), arg("start_offset") = 0,
          "Registers the chunk of `tokens` computed at `position` over `blocks` from "
          "`start_offset` (the caller holds the blocks); False when a valid chunk with this key is "
          "registered.")
      .def(
          "find",
          [](PyChunkIndex& s, BlockHash key, std::vector<TokenId> tokens) {
            return s.index->Find(key, tokens);
          },
          arg("key"), arg("tokens"), "The chunk's location, or None. Pins nothing.")
      .def(
          "acquire",
          [](PyChunkIndex& s, const ChunkLocation& l) { CheckStatus(s.index->Acquire(l)); },
          arg("location"),
          "Pins every block of `location` before its KV is read; FailedPreconditionError when the "
          "chunk is gone (compute its tokens instead).")
      .def(
          "release",
          [](PyChunkIndex& s, const ChunkLocation& l) { CheckStatus(s.index->Release(l)); },
          arg("location"), "Unpins the blocks acquire pinned (tail first).")
      .def(
          "erase", [](PyChunkIndex& s, BlockHash key) { CheckStatus(s.index->Erase(key)); },
          arg("key"),
          "Forgets the chunk under `key` (its blocks stay cached in the pool); NotFoundError when "
          "unknown.")
      .def("__len__", [](PyChunkIndex& s) { return s.index->size(); })
      .def("__contains__", [](PyChunkIndex& s, BlockHash key) { return s.index->Contains(key); })
      .def(
          "num_chunks_using", [](PyChunkIndex& s, BlockId b) { return s.index->NumChunksUsing(b); },
          arg("block"), "Chunks that use `block`.")
      .def_property_readonly(
          "stats", [](PyChunkIndex& s) { return s.index->stats(); },
          "Lookup and insert counters (ChunkIndexStats).")
      .def_property_readonly(
          "pool", [](PyChunkIndex& s) { return s.pool_owner; }, "The BlockPool the index shares.")
      .def(
          "validate_invariants",
          [](PyChunkIndex& s) { CheckStatus(s.index->ValidateInvariants()); },
          "Raises InternalError when an internal invariant is broken.");
}

void BindHashes(py::module_& m) {
  m.def(
      "eviction_policy_names",
      [] {
        std::vector<std::string> out;
        for (std::string_view n : EvictionPolicyNames()) out.emplace_back(n);
        return out;
      },
      "Names of the built-in eviction policies (for eviction_policy=).");
  m.def("root_hash", &RootHash, arg("cache_salt") = "", arg("model_fingerprint") = "",
        "The chain root of a request (16 bytes).");
  m.def(
      "hash_block",
      [](BlockHash parent, std::vector<TokenId> tokens, uint64_t adapter_id) {
        return HashBlock(DefaultBlockHasher(), parent, tokens, {.adapter_id = adapter_id});
      },
      arg("parent"), arg("tokens"), py::kw_only(), arg("adapter_id") = 0,
      "XXH3-128 of one full block chained from `parent` (as the cache hashes it).");
  m.def(
      "hash_from_u64", [](uint64_t id) { return BlockHash::FromU64(id); }, arg("id"),
      "The 16-byte hash of a 64-bit id (e.g. a Mooncake hash id).");
  m.def(
      "chunk_key",
      [](std::vector<TokenId> tokens, std::string cache_salt, uint64_t adapter_id,
         std::string rope_fingerprint, std::string model_fingerprint) {
        return ChunkKey(tokens, {.cache_salt = cache_salt,
                                 .adapter_id = adapter_id,
                                 .rope_fingerprint = rope_fingerprint,
                                 .model_fingerprint = model_fingerprint});
      },
      arg("tokens"), py::kw_only(), arg("cache_salt") = "", arg("adapter_id") = 0,
      arg("rope_fingerprint") = "", arg("model_fingerprint") = "",
      "The position-free content hash of a chunk.");
}

}  // namespace

std::unique_ptr<EvictionPolicy> PolicyArgument(py::handle policy, std::string* name) {
  if (py::isinstance<py::str>(policy)) {
    *name = policy.cast<std::string>();
    return nullptr;
  }
  if (!py::hasattr(policy, "pick_victim") || !py::hasattr(policy, "on_release")) {
    std::string names;
    for (std::string_view n : EvictionPolicyNames())
      names += (names.empty() ? "" : ", ") + std::string(n);
    ThrowInvalidArgument("eviction_policy must be a built-in policy name (" + names +
                         ") or an object implementing pagedkv.EvictionPolicy (pick_victim, "
                         "on_release, ...)");
  }
  return std::make_unique<PythonPolicy>(py::reinterpret_borrow<py::object>(policy));
}

void BindPool(py::module_& m) {
  BindHashes(m);
  BindBlockPool(m);
  BindChunkIndex(m);
}

}  // namespace pagedkv::python
