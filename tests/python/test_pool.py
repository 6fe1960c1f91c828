"""BlockPool, ChunkIndex, the eviction policies and a policy written in Python."""

from __future__ import annotations

import random

import pytest

import pagedkv


def h(i: int) -> bytes:
    return pagedkv.hash_from_u64(i)


def test_pool_lookup_pin_allocate_insert():
    pool = pagedkv.BlockPool(num_blocks=4, block_size=2, record_events=True)
    b = pool.allocate()
    assert pool.insert(b, h(1), h(0), tokens=[1, 2])
    assert pool.find_cached(h(1)) == b and pool.find_cached(h(2)) is None
    assert pool.cached_hash(b) == h(1) and pool.parent_hash(b) == h(0)
    assert pool.cached_tokens(b) == [1, 2] and pool.tokens_match(b, [1, 2])
    b2 = pool.allocate()
    assert not pool.insert(b2, h(1), h(0))  # another block holds the hash
    assert pool.insert(b2, h(2), h(1), parent_block=b) and pool.is_linked_to(b2, b)
    pool.unpin([b2, b])
    assert pool.num_evictable_blocks == 2 and pool.num_free_blocks == 2
    pool.pin(b)
    assert pool.ref_count(b) == 1 and pool.num_used_blocks == 1
    assert [type(e).__name__ for e in pool.take_events()] == ["BlockStored", "BlockStored"]
    assert pool.allocate(3) and pool.num_available_blocks == 0
    pool.validate_invariants()


def test_pool_errors_change_nothing():
    pool = pagedkv.BlockPool(num_blocks=2, block_size=2)
    with pytest.raises(pagedkv.FailedPreconditionError):
        pool.unpin(0)
    with pytest.raises(pagedkv.InvalidArgumentError):
        pool.pin(7)
    a = pool.allocate()
    with pytest.raises(pagedkv.FailedPreconditionError):
        pool.unpin([a, a])  # all or nothing
    assert pool.ref_count(a) == 1
    with pytest.raises(pagedkv.ResourceExhaustedError):
        pool.allocate(2)
    assert pool.num_free_blocks == 1
    with pytest.raises(pagedkv.InvalidArgumentError):
        pool.insert(a, h(1), h(0), tokens=[1])  # not a whole block
    assert not pool.is_cached(a)
    with pytest.raises(pagedkv.InvalidArgumentError):
        pagedkv.BlockPool(num_blocks=2, eviction_policy=42)
    with pytest.raises(TypeError):
        pool.find_cached(b"short")


class MruPolicy(pagedkv.EvictionPolicy):
    """Most recently released first: the opposite of LRU, so the test sees the pool follow it."""

    name = "mru"

    def init(self, num_blocks):
        self.calls = []
        self.candidates = []

    def on_insert(self, block, hash):
        self.calls.append(("insert", block))

    def on_access(self, block, hash):
        self.calls.append(("access", block))
        if block in self.candidates:
            self.candidates.remove(block)

    def on_release(self, block, hash):
        self.calls.append(("release", block))
        self.candidates.append(block)

    def on_remove(self, block, hash):
        if block in self.candidates:
            self.candidates.remove(block)

    def pick_victim(self):
        return self.candidates.pop()

    def clear(self):
        self.candidates.clear()


def fill(pool, n):
    blocks = []
    for i in range(n):
        b = pool.allocate()
        pool.insert(b, h(100 + i), h(0))
        blocks.append(b)
    pool.unpin(blocks)  # released in order 0, 1, ..., n-1
    return blocks


def test_python_policy_is_called_by_the_pool():
    policy = MruPolicy()
    pool = pagedkv.BlockPool(num_blocks=3, block_size=1, eviction_policy=policy)
    assert pool.policy_name == "mru"
    blocks = fill(pool, 3)
    victim = pool.allocate()
    assert victim == blocks[-1]  # MRU: the last released
    assert pool.find_cached(h(102)) is None and pool.find_cached(h(100)) == blocks[0]
    assert ("release", blocks[2]) in policy.calls and ("insert", blocks[0]) in policy.calls
    pool.pin(blocks[0])
    assert ("access", blocks[0]) in policy.calls
    pool.validate_invariants()

    lru = pagedkv.BlockPool(num_blocks=3, block_size=1, eviction_policy="lru")
    lru_blocks = fill(lru, 3)
    assert lru.allocate() == lru_blocks[0]  # the same traffic under LRU: the first released


def test_python_policy_in_a_kv_cache_manager():
    policy = MruPolicy()
    m = pagedkv.KvCacheManager(num_blocks=2, block_size=2, eviction_policy=policy)
    for rid, prompt in [(1, [1, 2, 3]), (2, [4, 5, 6])]:
        r = m.new_request(rid, prompt)
        m.allocate_slots(r, 3)
        m.free(rid)
    assert m.stats.evictions >= 1 and any(c[0] == "release" for c in policy.calls)


class BrokenPolicy(MruPolicy):
    def pick_victim(self):
        raise RuntimeError("boom")


def test_broken_python_policy_fails_cleanly(monkeypatch):
    reported = []
    monkeypatch.setattr("sys.unraisablehook", lambda u: reported.append(u.exc_value))
    pool = pagedkv.BlockPool(num_blocks=1, block_size=1, eviction_policy=BrokenPolicy())
    fill(pool, 1)
    with pytest.raises(pagedkv.InternalError):
        pool.allocate()
    assert reported and "boom" in str(reported[0])
    assert pool.num_cached_blocks == 1  # nothing was evicted


@pytest.mark.parametrize("policy", ["lru", "lfu", "fifo"])
def test_builtin_policies_against_python_reference(policy):
    """Random pin/unpin/allocate traffic against a brute-force model of each built-in policy."""
    rng = random.Random(7)
    n = 16
    pool = pagedkv.BlockPool(num_blocks=n, block_size=1, eviction_policy=policy)
    order = []  # candidates; LRU: release order, FIFO: insert order, LFU: (hits, release order)
    inserted, hits, released_at = {}, {}, {}
    clock = 0
    held = {}
    key = 0
    for _ in range(600):
        clock += 1
        if held and rng.random() < 0.5:
            b = rng.choice(list(held))
            pool.unpin(b)
            del held[b]
            if pool.is_cached(b):
                released_at[b] = clock
                order.append(b)
            continue
        cached = [b for b in order]
        if cached and rng.random() < 0.3:
            b = rng.choice(cached)
            pool.pin(b)
            order.remove(b)
            hits[b] += 1
            held[b] = True
            continue
        if pool.num_free_blocks == 0 and order:
            if policy == "lru":
                expected = min(order, key=lambda b: released_at[b])
            elif policy == "fifo":
                expected = min(order, key=lambda b: inserted[b])
            else:
                expected = min(order, key=lambda b: (hits[b], released_at[b]))
        else:
            expected = None
        if pool.num_available_blocks == 0:
            continue
        b = pool.allocate()
        if expected is not None:
            assert b == expected
            order.remove(b)
        key += 1
        pool.insert(b, h(key), h(0))
        inserted[b], hits[b] = clock, 0
        held[b] = True
    pool.validate_invariants()


def test_every_policy_name_drives_a_pool_and_a_replay():
    """The names come from the C++ factory: each runs random traffic and a cache-mode replay."""
    names = pagedkv.eviction_policy_names()
    assert {"arc", "s3fifo", "wtinylfu", "chain"} <= set(names)
    for policy in names:
        rng = random.Random(3)
        pool = pagedkv.BlockPool(num_blocks=8, block_size=1, eviction_policy=policy)
        held = []
        for key in range(1, 400):
            if held and rng.random() < 0.4:
                pool.unpin(held.pop(rng.randrange(len(held))))
                continue
            cached = pool.find_cached(h(rng.randint(1, key)))
            if cached is not None and rng.random() < 0.5:
                pool.pin(cached)
                held.append(cached)
            elif pool.num_available_blocks > 0:
                b = pool.allocate()
                pool.insert(b, h(key), h(key - 1))
                held.append(b)
            pool.validate_invariants()
        out = pagedkv.replay.run(workload="system-prompt", requests=60, capacity_blocks=200,
                                 policies=[policy])
        assert out["policy"] == policy and 0 < out["block_hit_rate"] < 1


def test_chunk_index_over_a_pool():
    pool = pagedkv.BlockPool(num_blocks=8, block_size=4)
    index = pagedkv.ChunkIndex(pool)
    doc = list(range(10, 20))
    key = pagedkv.chunk_key(doc, rope_fingerprint="rope")
    assert key != pagedkv.chunk_key(doc) and len(key) == 16
    blocks = pool.allocate(3)
    assert index.insert(key, doc, 40, blocks, start_offset=2)
    assert key in index and len(index) == 1
    pool.unpin(list(reversed(blocks)))
    loc = index.find(key, doc)
    assert loc.blocks == blocks and loc.position == 40 and loc.num_tokens == 10
    assert loc.slot_of(0, 4) == blocks[0] * 4 + 2 and loc.position_of(3) == 43
    with index.pinned(loc):
        assert all(pool.ref_count(b) == 1 for b in blocks)
    assert all(pool.ref_count(b) == 0 for b in blocks)
    assert index.find(key, doc[:-1] + [0]) is None  # verified tokens
    pool.reset_prefix_cache()  # drops the blocks, so the chunk
    assert index.find(key, doc) is None and index.stats.invalidations == 1
    with pytest.raises(pagedkv.NotFoundError):
        index.erase(key)
    index.validate_invariants()


def test_chunk_index_keeps_its_pool_alive():
    index = pagedkv.ChunkIndex(pagedkv.BlockPool(num_blocks=4, block_size=2))
    blocks = index.pool.allocate(1)
    assert index.insert(pagedkv.chunk_key([1, 2]), [1, 2], 0, blocks)
    assert index.pool.num_cached_blocks == 1
