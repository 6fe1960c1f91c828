# Copyright 2026 The pagedkv Authors.
"""pagedkv.KvCacheManager over several KV cache groups from Python: KV cache groups (full attention, sliding window)
over one pool, vLLM's hybrid hit rule, out-of-window blocks released as evictable, failures that
change nothing, and event batches that vLLM 0.33's own decoder reads with their group fields.

The msgspec decoder uses the vLLM 0.33 structs written out in test_kv_events_wire.py; that part
skips when msgspec is absent (scripts/python_refs.sh installs it)."""

from __future__ import annotations

import msgpack
import pytest

import pagedkv

BS = 4
WINDOW = 6  # a token reads itself and 5 earlier tokens: cdiv(5, 4) = 2 blocks before the hit


def gpt_oss_style(num_blocks=64, **kw):
    groups = [pagedkv.KvCacheGroupSpec("full_attention", num_layers=2),
              pagedkv.KvCacheGroupSpec("sliding_window", sliding_window=WINDOW, num_layers=2)]
    return pagedkv.KvCacheManager(num_blocks=num_blocks, block_size=BS, groups=groups, **kw)


def run_prompt(m, rid, prompt):
    r = m.new_request(rid, prompt)
    hit = m.get_computed_blocks(r)
    m.allocate_slots(r, r.num_tokens - hit.num_computed_tokens, hit)
    return r, hit


def test_groups_and_specs():
    m = gpt_oss_style()
    assert m.num_groups == 2 and m.block_size == BS
    assert [g.kind for g in m.groups] == ["full_attention", "sliding_window"]
    assert m.groups[1].sliding_window == WINDOW
    assert m.groups[1].as_dict() == {"kind": "sliding_window", "sliding_window": WINDOW,
                                     "num_layers": 2}


def test_window_group_releases_what_falls_out_of_the_window():
    m = gpt_oss_style()
    prompt = list(range(40))  # 10 blocks
    r, _ = run_prompt(m, 1, prompt)
    assert len(m.block_table(1, 0)) == 10 and -1 not in list(m.block_table(1, 0))
    # Tokens count as computed at the next allocate_slots: decode one token.
    r.append_token(99)
    m.allocate_slots(r, 1)
    window_table = list(m.block_table(1, 1))
    # Computed 40 tokens: the next token (40) reads 35..40, so blocks 0..7 (tokens < 32) go.
    assert window_table[:8] == [-1] * 8 and -1 not in window_table[8:]
    full, window = 11, len(window_table) - 8
    assert m.num_held_blocks(1) == full + window
    assert m.num_held_layer_blocks(1) == 2 * (full + window)
    m.validate_invariants()


def test_released_cached_blocks_stay_evictable_and_serve_a_later_hit():
    m = gpt_oss_style()
    prompt = list(range(40))
    r, _ = run_prompt(m, 1, prompt)
    before = m.num_available_blocks
    r.append_token(99)
    m.allocate_slots(r, 1)
    # 8 window blocks released (they were cached: evictable, so available), 1 new full block
    # and 1 new window block taken for token 40.
    assert m.num_available_blocks == before + 8 - 2
    m.free(1)
    r2 = m.new_request(2, prompt + [7, 7, 7, 7, 1])
    hit = m.get_computed_blocks(r2)
    assert hit.num_computed_tokens == 40
    assert len(hit.group_blocks) == 2 and len(hit.group_blocks[0]) == 10
    assert hit.group_blocks[1][:8] == [-1] * 8 and -1 not in hit.group_blocks[1][8:]
    assert m.stats.hit_tokens == 40
    m.allocate_slots(r2, r2.num_tokens - 40, hit)
    m.validate_invariants()


def test_plan_counts_every_group_and_eviction_shortens_the_hit():
    m = gpt_oss_style()
    prompt = list(range(40))
    run_prompt(m, 1, prompt)
    plan = m.plan_allocation(m.new_request(5, list(range(100, 140))), 40)
    assert plan.per_group == [10, 10] and plan.total == 20 and plan.total_released == 0
    m.free(1)
    # 20 cached blocks are evictable, 44 free: a 60-block request must evict 16 of them.
    run_prompt(m, 3, list(range(1000, 1000 + BS * 30)))
    r2 = m.new_request(2, prompt + [1])
    assert m.get_computed_blocks(r2).num_computed_tokens < 40
    m.validate_invariants()


def test_a_refused_allocation_changes_nothing():
    m = gpt_oss_style(num_blocks=8)
    r = m.new_request(1, list(range(40)))  # needs 20 blocks
    available = m.num_available_blocks
    with pytest.raises(pagedkv.ResourceExhaustedError):
        m.allocate_slots(r, r.num_tokens)
    assert m.num_available_blocks == available and 1 not in m
    m.validate_invariants()


def test_bad_configs_say_what_to_fix():
    with pytest.raises(pagedkv.InvalidArgumentError, match="full_attention"):
        pagedkv.KvCacheGroupSpec("chunked")
    with pytest.raises(pagedkv.InvalidArgumentError):
        pagedkv.KvCacheManager(num_blocks=8, block_size=BS, groups=[
            pagedkv.KvCacheGroupSpec("sliding_window", sliding_window=8)])
    with pytest.raises(pagedkv.InvalidArgumentError):
        pagedkv.KvCacheManager(num_blocks=8, block_size=BS, groups=[
            pagedkv.KvCacheGroupSpec("full_attention"),
            pagedkv.KvCacheGroupSpec("sliding_window", sliding_window=0)])
    with pytest.raises(pagedkv.NotFoundError):
        gpt_oss_style().free(3)


def stored_events(batch_bytes, rank=0):
    # vLLM's EventBatch is [ts, events, data_parallel_rank] (the rank omitted when None).
    ts, events, *tail = msgpack.unpackb(batch_bytes, raw=False)
    assert tail == [rank]
    return [e for e in events if e["type"] == "BlockStored"]


def test_event_batches_carry_the_group_fields():
    m = gpt_oss_style(collect_event_batches=True, data_parallel_rank=0)
    run_prompt(m, 1, list(range(16)))
    stored = stored_events(m.take_event_batch(1.5))
    by_group = {e["group_idx"]: e for e in stored}
    assert set(by_group) == {0, 1}
    assert by_group[0]["kv_cache_spec_kind"] == "full_attention"
    assert "kv_cache_spec_sliding_window" not in by_group[0]
    assert by_group[1]["kv_cache_spec_kind"] == "sliding_window"
    assert by_group[1]["kv_cache_spec_sliding_window"] == WINDOW
    assert all(len(e["block_hashes"]) == 4 for e in stored)
    assert stored_events(m.take_event_batch(2.0)) == []


def test_vllm_decoder_reads_the_hybrid_batches():
    wire = pytest.importorskip("test_kv_events_wire")
    if wire.msgspec is None:
        pytest.skip("msgspec not installed (scripts/python_refs.sh)")
    m = gpt_oss_style(num_blocks=12, collect_event_batches=True)
    run_prompt(m, 1, list(range(16)))
    m.free(1)
    run_prompt(m, 2, list(range(500, 516)))  # evicts: BlockRemoved with group_idx
    decoder = wire.msgspec.msgpack.Decoder(wire.KVEventBatch)
    batch = decoder.decode(m.take_event_batch(3.0))
    stored = [e for e in batch.events if isinstance(e, wire.BlockStored)]
    removed = [e for e in batch.events if isinstance(e, wire.BlockRemoved)]
    assert {(e.group_idx, e.kv_cache_spec_kind, e.kv_cache_spec_sliding_window)
            for e in stored} == {(0, "full_attention", None), (1, "sliding_window", WINDOW)}
    assert removed and {e.group_idx for e in removed} <= {0, 1}
    assert sum(len(e.block_hashes) for e in stored) == 16


def test_deprecated_hybrid_alias_still_works():
    groups = [pagedkv.KvCacheGroupSpec("full_attention"),
              pagedkv.KvCacheGroupSpec("sliding_window", sliding_window=WINDOW)]
    with pytest.warns(DeprecationWarning, match="KvCacheManager"):
        m = pagedkv.HybridKvCacheManager(num_blocks=64, block_size=BS, groups=groups)
    assert isinstance(m, pagedkv.KvCacheManager) and m.num_groups == 2
    r = m.new_request(1, list(range(40)))
    hit = m.get_computed_blocks(r)
    assert isinstance(hit, pagedkv.ComputedBlocks)
    plan = m.num_blocks_to_allocate(r, 40, hit)
    assert isinstance(plan, pagedkv.AllocationPlan) and plan.total == 20
    m.allocate_slots(r, 40, hit)
    assert len(m.block_table(1, 1)) == 10
    m.free(1)
    m.validate_invariants()
