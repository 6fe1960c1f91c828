"""KvCacheManager, CacheRequest, ComputedBlocks, CacheStats, KV events and the error mapping."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

import pagedkv
from conftest import source_dir


def test_version_matches_cmake_project():
    text = (source_dir() / "CMakeLists.txt").read_text()
    version = re.search(r"project\(pagedkv VERSION ([0-9.]+)", text).group(1)
    assert pagedkv.__version__ == version


def test_readme_example_runs():
    """The example of issue #12 / the README's Python section, verbatim."""
    readme = (source_dir() / "README.md").read_text()
    match = re.search(r"<!-- python-example -->\n(?:<!-- runnable -->\n)?```python\n(.*?)```",
                      readme, re.S)
    assert match, "README.md lost its Python example block"
    exec(compile(match.group(1), "README.md", "exec"), {})


def test_prefix_hit_after_free():
    m = pagedkv.KvCacheManager(num_blocks=8, block_size=4, model_fingerprint="t")
    r = m.new_request(1, list(range(10)))
    assert r.num_tokens == 10 and r.num_full_blocks == 2 and len(r.block_hashes) == 2
    assert all(isinstance(h, bytes) and len(h) == 16 for h in r.block_hashes)
    hit = m.get_computed_blocks(r)
    assert hit.num_computed_tokens == 0 and hit.blocks == []
    m.allocate_slots(r, 10, hit)
    table = m.block_table(1)
    assert table.dtype == np.int32 and len(table) == 3 and not table.flags.writeable
    slots = m.slot_mapping(1, 0, 10)
    assert list(slots) == [int(table[p // 4]) * 4 + p % 4 for p in range(10)]
    m.free(1)
    r2 = m.new_request(2, list(range(10)) + [99])
    hit2 = m.get_computed_blocks(r2)
    assert hit2.num_computed_tokens == 8 and hit2.blocks == list(table[:2])
    m.allocate_slots(r2, r2.num_tokens - hit2.num_computed_tokens, hit2)
    s = m.stats
    assert s.lookups == 2 and s.hit_tokens == 8 and s.hit_blocks == 2
    assert s.as_dict()["hit_tokens"] == 8 and "hit_tokens=8" in repr(s)
    m.validate_invariants()


def test_block_table_copy_survives_free():
    m = pagedkv.KvCacheManager(num_blocks=4, block_size=2)
    r = m.new_request(5, [1, 2, 3])
    m.allocate_slots(r, 3)
    table = m.block_table(5)
    m.free(5)
    del m
    assert len(table) == 2 and table.sum() >= 0  # still readable: a copy


def test_decode_appends_and_caches():
    m = pagedkv.KvCacheManager(num_blocks=8, block_size=4)
    r = m.new_request(1, [1, 2, 3])
    m.allocate_slots(r, 3)
    m.take_events()
    r.append_token(4)
    m.allocate_slots(r, 1)
    stored = [e for e in m.take_events() if isinstance(e, pagedkv.BlockStored)]
    assert [e.token_ids for e in stored] == [[1, 2, 3, 4]]
    assert stored[0].hash == r.block_hashes[0] and stored[0].parent_hash == r.root_hash
    assert stored[0].token_count == 4 and stored[0].block == m.block_table(1)[0]
    assert m.num_allocated_tokens(1) == 4


def test_errors_map_to_classes_and_change_nothing():
    m = pagedkv.KvCacheManager(num_blocks=2, block_size=4, vocab_size=10)
    with pytest.raises(pagedkv.NotFoundError) as e:
        m.free(99)
    assert isinstance(e.value, KeyError) and isinstance(e.value, pagedkv.Error)
    assert e.value.code == "NOT_FOUND" and "99" in str(e.value)
    with pytest.raises(pagedkv.InvalidArgumentError) as e:
        m.new_request(1, [3, 11])
    assert isinstance(e.value, ValueError)
    with pytest.raises(ValueError):
        pagedkv.KvCacheManager(num_blocks=0)
    with pytest.raises(pagedkv.InvalidArgumentError):
        pagedkv.KvCacheManager(num_blocks=4, eviction_policy="nope")
    r = m.new_request(1, list(range(9)))
    with pytest.raises(pagedkv.ResourceExhaustedError) as e:
        m.allocate_slots(r, 9)  # 3 blocks > 2
    assert not isinstance(e.value, ValueError)
    assert 1 not in m and m.num_available_blocks == 2 and m.num_requests == 0
    with pytest.raises(pagedkv.InvalidArgumentError):
        r.append_tokens([1, 2, 50])
    assert r.num_tokens == 9  # all or nothing
    with pytest.raises(pagedkv.NotFoundError):
        m.block_table(1)


def test_events_listener_and_reset():
    m = pagedkv.KvCacheManager(num_blocks=2, block_size=2)
    seen = []
    lid = m.add_event_listener(seen.append)
    r = m.new_request(1, [1, 2, 3])
    m.allocate_slots(r, 3)
    m.free(1)
    r = m.new_request(2, [7, 8, 9])
    m.allocate_slots(r, 3)  # evicts the cached block of request 1
    m.reset_prefix_cache()
    kinds = [type(e).__name__ for e in seen]
    assert kinds == ["BlockStored", "BlockRemoved", "BlockStored", "AllBlocksCleared"]
    assert m.take_events() == seen  # the same batch, pulled
    assert m.take_events() == []
    assert m.remove_event_listener(lid) and not m.remove_event_listener(lid)


def test_listener_reentry_is_refused():
    m = pagedkv.KvCacheManager(num_blocks=4, block_size=2)
    errors = []

    def listener(event):
        try:
            m.free(1)
        except RuntimeError as e:
            errors.append(e)

    m.add_event_listener(listener)
    r = m.new_request(1, [1, 2, 3])
    m.allocate_slots(r, 3)
    assert len(errors) == 1 and "must not call back" in str(errors[0])
    m.free(1)  # fine outside the listener


def test_record_events_off():
    m = pagedkv.KvCacheManager(num_blocks=4, block_size=2, record_events=False)
    r = m.new_request(1, [1, 2, 3])
    m.allocate_slots(r, 3)
    assert m.take_events() == []


def test_randomised_against_reference():
    """Random requests against a brute-force model of the prefix cache (enough blocks that
    nothing is evicted): each hit is the longest previously computed block-aligned prefix."""
    rng = random.Random(12)
    bs = 4
    m = pagedkv.KvCacheManager(num_blocks=4096, block_size=bs)
    computed_prefixes = set()
    for rid in range(1, 200):
        prompt = [rng.randrange(3) for _ in range(rng.randrange(1, 30))]
        r = m.new_request(rid, prompt)
        hit = m.get_computed_blocks(r)
        expected = 0
        for k in range(1, (len(prompt) - 1) // bs + 1):
            if tuple(prompt[: k * bs]) in computed_prefixes:
                expected = k * bs
        assert hit.num_computed_tokens == expected, (rid, prompt)
        m.allocate_slots(r, len(prompt) - expected, hit)
        for k in range(1, len(prompt) // bs + 1):
            computed_prefixes.add(tuple(prompt[: k * bs]))
        if rng.random() < 0.7:
            m.free(rid)
    m.validate_invariants()


def test_cache_request_standalone():
    r = pagedkv.CacheRequest(3, [5, 6, 7, 8, 9], block_size=2, cache_salt="s")
    assert r.id == 3 and len(r) == 5 and r.num_full_blocks == 2 and r.cache_salt == "s"
    assert r.block_hashes[0] == pagedkv.hash_block(r.root_hash, [5, 6])
    assert r.root_hash == pagedkv.root_hash("s", "")
    assert list(r.tokens) == [5, 6, 7, 8, 9]
    mm = pagedkv.MultimodalInput(offset=0, length=2, content_hash=b"\x01" * 16)
    r2 = pagedkv.CacheRequest(4, [5, 6, 7, 8, 9], block_size=2, cache_salt="s", multimodal=[mm])
    assert r2.block_hashes[0] != r.block_hashes[0] and r2.block_hashes[1] != r.block_hashes[1]


@pytest.mark.parametrize("enable", [True, False])
def test_pinned_system_prompt_survives_other_traffic(enable):
    m = pagedkv.KvCacheManager(num_blocks=8, block_size=4, enable_priorities=enable)
    prompt = list(range(1, 13))
    first = m.new_request(1, prompt, priority_spans=[(0, 8, 90)])
    m.allocate_slots(first, 12)
    m.free(1)
    for rid in range(2, 6):  # each fills the pool and is freed
        r = m.new_request(rid, [100 + rid] * 32)
        m.allocate_slots(r, 24)
        m.free(rid)
    again = m.new_request(9, prompt)
    assert m.get_computed_blocks(again).num_computed_tokens == (8 if enable else 0)
    m.validate_invariants()


def test_bad_priorities_raise_value_error():
    m = pagedkv.KvCacheManager(num_blocks=4, block_size=4, enable_priorities=True)
    with pytest.raises(ValueError, match="priority"):
        m.new_request(1, [1, 2, 3], priority=200)
    with pytest.raises(ValueError, match="priority span"):
        m.new_request(1, [1, 2, 3], priority_spans=[(4, 4, 90)])


def test_duplicates_keep_the_prefix_reachable():
    m = pagedkv.KvCacheManager(num_blocks=8, block_size=16)
    prompt = list(range(100, 149))  # 49 tokens: 3 full blocks
    a, b = m.new_request(1, prompt), m.new_request(2, prompt)
    miss_a, miss_b = m.get_computed_blocks(a), m.get_computed_blocks(b)
    m.allocate_slots(a, 49, miss_a)
    m.allocate_slots(b, 49, miss_b)
    m.free(1)
    filler = m.new_request(3, [7] * (16 * m.num_available_blocks))
    m.allocate_slots(filler, filler.num_tokens)
    m.free(3)
    assert m.stats.promoted_duplicates == 3
    assert m.get_computed_blocks(m.new_request(4, prompt)).num_computed_tokens == 48
