"""Lookahead slots, truncation, draft tokens, speculative decoding, cached tokens and Prometheus
metrics through the Python module (the real extension)."""

from __future__ import annotations

import pytest

import pagedkv


def test_lookahead_slots_are_reserved_but_never_cached():
    m = pagedkv.KvCacheManager(num_blocks=8, block_size=4)
    r = m.new_request(1, list(range(6)))
    m.allocate_slots(r, 6, m.get_computed_blocks(r), num_lookahead_tokens=5)
    assert len(m.block_table(1)) == 3
    assert m.num_lookahead_tokens(1) == 5 and m.num_allocated_tokens(1) == 6
    assert m.stats.stored_blocks == 1
    assert m.num_blocks_to_allocate(r, 0, num_lookahead_tokens=20) == 4
    with pytest.raises(pagedkv.InvalidArgumentError):
        m.allocate_slots(r, 0, num_lookahead_tokens=-1)
    m.validate_invariants()


def test_truncate_request_rolls_back_and_uncaches():
    m = pagedkv.KvCacheManager(num_blocks=8, block_size=4)
    r = m.new_request(1, list(range(6)))
    m.allocate_slots(r, 6, m.get_computed_blocks(r))
    r.append_tokens([50, 51, 52, 53, 54, 55])
    m.allocate_slots(r, 6)
    assert m.stats.stored_blocks == 3
    m.truncate_request(r, 6)
    assert r.num_tokens == 6 and r.num_full_blocks == 1
    assert m.num_allocated_tokens(1) == 6 and len(m.block_table(1)) == 2
    other = m.new_request(2, list(range(6)) + [50, 51, 52])
    assert m.get_computed_blocks(other).num_computed_tokens == 4  # block 1 is no longer indexed
    with pytest.raises(pagedkv.InvalidArgumentError):
        m.truncate_request(r, 7)
    req = pagedkv.CacheRequest(3, [1, 2, 3, 4, 5], block_size=4)
    req.truncate(3)
    assert list(req.tokens) == [1, 2, 3] and req.num_full_blocks == 0


def test_scheduler_drafts_one_plus_k_tokens():
    m = pagedkv.KvCacheManager(num_blocks=32, block_size=4)
    s = pagedkv.Scheduler(m)
    s.add_request(1, [1, 2, 3, 4, 5], max_new_tokens=10)
    s.schedule()
    s.update_from_output({1: 42})
    s.set_draft_tokens(1, [50, 51, 52])
    batch = s.schedule()
    assert list(batch.token_ids) == [42, 50, 51, 52]
    assert batch.sequences[0].num_draft_tokens == 3 and batch.stats.num_draft_tokens == 3
    out = s.update_from_output([(1, 60, 2)])
    assert out[0].new_tokens == [50, 51, 60] and out[0].token == 60
    assert s.stats.num_draft_tokens == 3 and s.stats.num_accepted_draft_tokens == 2
    with pytest.raises(pagedkv.NotFoundError):
        s.set_draft_tokens(9, [1])
    with pytest.raises(pagedkv.InvalidArgumentError):
        s.update_from_output([(1, 2, 3, 4)])


def test_engine_speculative_ids_match_and_metrics_parse(aidreams):
    from prometheus_client.parser import text_string_to_metric_families

    def run(k):
        e = pagedkv.Engine.load(str(aidreams / "aidreams260K.bin"), str(aidreams / "tok512.bin"),
                                backend="cpu", num_threads=1, num_speculative_tokens=k,
                                collect_block_metrics=True)
        results = e.generate([pagedkv.GenerationRequest(prompt_text="Once upon a time",
                                                        max_new_tokens=80)] * 2)
        return e, results

    plain, plain_results = run(0)
    spec, spec_results = run(4)
    assert [r.output_tokens for r in spec_results] == [r.output_tokens for r in plain_results]
    assert 0 < spec.stats.num_accepted_draft_tokens <= spec.stats.num_draft_tokens
    assert plain.stats.num_draft_tokens == 0
    second = spec_results[1]
    assert second.num_prefix_hit_tokens == (second.num_device_hit_tokens
                                            + second.num_host_hit_tokens
                                            + second.num_remote_hit_tokens)
    text = spec.write_prometheus(labels={"model": "aidreams260K"})
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["pagedkv_kv_block_reuse_gap_seconds"].type == "histogram"
    hits = families["pagedkv_prefix_cache_hits"].samples[0]
    assert hits.labels == {"model": "aidreams260K"} and hits.value >= 0
    with pytest.raises(pagedkv.InvalidArgumentError):
        spec.write_prometheus(labels={"le": "x"})
    m = pagedkv.KvCacheManager(num_blocks=4, block_size=4)
    assert "pagedkv_kv_cache_usage_ratio 0\n" in m.write_prometheus()
