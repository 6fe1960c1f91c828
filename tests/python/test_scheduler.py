"""Scheduler: flat batches as numpy views, their lifetimes, outputs, errors and statistics."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import pagedkv


def make(num_blocks=64, block_size=4, **options):
    cache = pagedkv.KvCacheManager(num_blocks=num_blocks, block_size=block_size)
    return cache, pagedkv.Scheduler(cache, **options)


def test_batch_views_are_flat_and_consistent():
    cache, s = make()
    s.add_request(1, [5, 6, 7, 8, 9, 10], max_new_tokens=2)
    s.add_request(2, [5, 6, 7, 8, 1, 2, 3], max_new_tokens=2)
    b = s.schedule()
    assert b.num_sequences == 2 and len(b) == b.num_tokens
    for name, dtype in [("token_ids", np.int32), ("positions", np.int32),
                        ("slot_mapping", np.int64), ("query_start_loc", np.int32),
                        ("block_table_ids", np.int32), ("block_table_start", np.int32)]:
        arr = getattr(b, name)
        assert arr.dtype == dtype and not arr.flags.writeable and not arr.flags.owndata, name
        with pytest.raises(ValueError):
            arr[0] = 1
    seq0, seq1 = b.sequences
    assert seq1.newly_admitted and seq1.num_prefix_hit_tokens == 4  # same-step prefix hit
    assert list(b.query_start_loc) == [0, seq0.num_scheduled_tokens, b.num_tokens]
    for i, seq in enumerate(b.sequences):
        table = b.block_table(i)
        assert len(table) == seq.num_blocks
        lo, hi = seq.query_start, seq.query_start + seq.num_scheduled_tokens
        pos = b.positions[lo:hi]
        assert list(pos) == list(range(seq.num_computed_tokens, seq.seq_len))
        np.testing.assert_array_equal(b.slot_mapping[lo:hi],
                                      table[pos // 4].astype(np.int64) * 4 + pos % 4)
    assert list(b.token_ids[:6]) == [5, 6, 7, 8, 9, 10] and b.block_size == 4
    assert b.slot_moves == [] and b.group_slot_moves == []  # one group, no chunk reuse
    assert b.stats.num_scheduled_tokens == b.num_tokens and b.stats.step == 0
    with pytest.raises(IndexError):
        b.block_table(2)


def test_views_outlive_the_scheduler_and_later_steps():
    cache, s = make()
    s.add_request(1, [1, 2, 3, 4, 5], max_new_tokens=3)
    b = s.schedule()
    tokens, table = b.token_ids, b.block_table(0)
    expected_tokens, expected_table = list(tokens), list(table)
    s.update_from_output({1: 7})
    s.schedule()  # a new batch: the old one is unchanged
    del b, s, cache
    gc.collect()
    assert list(tokens) == expected_tokens and list(table) == expected_table


def test_generation_to_finish_and_outputs():
    cache, s = make()
    s.add_request(1, [1, 2, 3], max_new_tokens=3, eos_token=99)
    s.add_request(2, [4, 5], max_new_tokens=5, stop_tokens=[42])
    finished = {}
    sampled_next = {1: [10, 11, 12], 2: [20, 42]}
    while s.has_unfinished_requests():
        b = s.schedule()
        sampled = [(q.request_id, sampled_next[q.request_id].pop(0))
                   for q in b.sequences if q.samples]
        for out in s.update_from_output(sampled):
            if out.finished:
                finished[out.request_id] = out
    assert finished[1].finish_reason == "length" and finished[1].output_tokens == [10, 11, 12]
    assert finished[2].finish_reason == "stop" and finished[2].output_tokens == [20, 42]
    assert s.stats.num_finished == 2 and cache.num_requests == 0
    cache.validate_invariants()


def test_errors_change_nothing():
    cache, s = make(num_blocks=4)
    with pytest.raises(pagedkv.InvalidArgumentError):
        pagedkv.Scheduler(cache, max_num_seqs=0)
    with pytest.raises(pagedkv.InvalidArgumentError):
        pagedkv.Scheduler(cache, policy="random")
    s.add_request(1, [1, 2, 3], max_new_tokens=2)
    with pytest.raises(pagedkv.AlreadyExistsError):
        s.add_request(1, [1])
    with pytest.raises(pagedkv.InvalidArgumentError):
        s.add_request(2, [])
    with pytest.raises(pagedkv.InvalidArgumentError):
        s.add_request(3, list(range(40)))  # never fits 4 blocks of 4
    assert s.num_waiting == 1
    b = s.schedule()
    with pytest.raises(pagedkv.FailedPreconditionError):
        s.schedule()  # output of the previous batch missing
    with pytest.raises(pagedkv.NotFoundError):
        s.update_from_output({7: 1})
    with pytest.raises(pagedkv.InvalidArgumentError):
        s.update_from_output([(1,)])
    assert s.get_request_info(1).status == "running"
    s.update_from_output({q.request_id: 3 for q in b.sequences if q.samples})
    s.abort_request(1)
    with pytest.raises(pagedkv.NotFoundError):
        s.abort_request(1)
    assert s.schedule().finished_request_ids == [1]


def test_preemption_under_a_small_pool():
    cache, s = make(num_blocks=6, block_size=2)
    for rid in range(1, 4):
        s.add_request(rid, [rid] * 4, max_new_tokens=6)
    preempted, steps = set(), 0
    while s.has_unfinished_requests():
        b = s.schedule()
        preempted.update(b.preempted_request_ids)
        s.update_from_output({q.request_id: 0 for q in b.sequences if q.samples})
        steps += 1
        assert steps < 200
    assert preempted and s.stats.num_preemptions >= len(preempted)
    cache.validate_invariants()


def test_scheduler_keeps_its_cache_alive():
    s = pagedkv.Scheduler(pagedkv.KvCacheManager(num_blocks=8, block_size=4))
    s.add_request(1, [1, 2, 3])
    gc.collect()
    s.schedule()
    assert s.cache.num_requests == 1


def test_samples_of_one_prompt_copy_its_partial_block():
    cache, s = make()
    prompt = list(range(1, 11))  # two full blocks of 4 and 2 tokens
    s.add_request(1, prompt, max_new_tokens=2)
    s.add_request(2, prompt, max_new_tokens=2, prompt_source=1)
    first = s.schedule()
    assert [q.request_id for q in first.sequences] == [1] and first.block_copies == []
    s.update_from_output({1: 50})
    b = s.schedule()
    sample = b.sequences[1]
    assert (sample.request_id, sample.num_prefix_hit_tokens, sample.num_copied_tokens,
            sample.num_scheduled_tokens) == (2, 8, 1, 1)
    [copy] = b.block_copies
    assert copy.as_dict() == {"src": int(b.block_table(0)[2]), "dst": int(b.block_table(1)[2])}
    assert b.stats.num_copied_tokens == 1 and s.stats.num_copied_tokens == 1
