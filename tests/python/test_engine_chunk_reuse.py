"""Engine.load(chunk_reuse=ChunkReuseOptions(...)): a document marked with chunks= is reused at
another offset, its keys re-rotated, on aidreams260K with an int8 KV cache (skipped when
../shared/data is absent); and the options' errors."""

from __future__ import annotations

import pytest

import pagedkv


def test_chunk_reuse_options_and_their_errors():
    o = pagedkv.ChunkReuseOptions(first_k=2, float_keys_memory=1 << 20)
    assert (o.mode, o.first_k, o.recompute_fraction, o.deviation_layer, o.float_keys_memory) == (
        "rerotate", 2, 0.0, 1, 1 << 20)
    assert repr(o) == ("ChunkReuseOptions(mode='rerotate', first_k=2, recompute_fraction=0, "
                       "deviation_layer=1, float_keys_memory=1048576)")
    o.mode = "off"
    assert o.mode == "off"
    with pytest.raises(pagedkv.InvalidArgumentError, match="mode = 'maybe'"):
        pagedkv.ChunkReuseOptions(mode="maybe")
    with pytest.raises(pagedkv.InvalidArgumentError, match="mode"):
        o.mode = "shift"
    assert o.mode == "off"  # a refused value changes nothing


def load(aidreams, reuse):
    return pagedkv.Engine.load(str(aidreams / "aidreams260K.bin"), str(aidreams / "tok512.bin"),
                               backend="cpu", kv_cache_dtype="int8", chunk_reuse=reuse)


def run_twice(engine):
    """One document after two different openings: the second request may reuse it, shifted."""
    tok = engine.tokenizer
    doc = tok.encode(" the old lighthouse keeper counted the waves", add_bos=False)
    results = []
    for opening in ("Echoes of", "A gentle hum rose over the quiet harbour and"):
        head = tok.encode(opening)
        prompt = head + doc + tok.encode(" until dawn", add_bos=False)
        request = pagedkv.GenerationRequest(prompt_tokens=prompt, max_new_tokens=4,
                                            chunks=[(len(head), len(doc))])
        results += engine.generate([request])
    return len(doc), results


def test_a_marked_document_is_reused_at_another_offset(aidreams):
    n, (first, second) = run_twice(load(aidreams, pagedkv.ChunkReuseOptions()))
    assert first.num_shifted_hit_tokens == 0 and second.num_shifted_hit_tokens == n

    engine = load(aidreams, pagedkv.ChunkReuseOptions(float_keys_memory=1 << 20))
    _, (_, second) = run_twice(engine)
    assert second.num_shifted_hit_tokens == n
    assert engine.stats.num_shifted_hit_tokens == n
    assert engine.stats.num_float_key_moves == n  # every moved key from its float key
    assert engine.stats.as_dict()["num_float_key_moves"] == n

    engine = load(aidreams, None)  # off (the default): chunks= marks nothing reusable
    _, (_, second) = run_twice(engine)
    assert second.num_shifted_hit_tokens == 0 and engine.stats.num_float_key_moves == 0


def test_bad_chunk_reuse_options_refuse_the_engine(aidreams):
    for bad, field in ((pagedkv.ChunkReuseOptions(first_k=-1), "first_k"),
                       (pagedkv.ChunkReuseOptions(recompute_fraction=1.5), "recompute_fraction"),
                       (pagedkv.ChunkReuseOptions(float_keys_memory=-1), "float_keys_memory")):
        with pytest.raises(pagedkv.InvalidArgumentError, match=field):
            load(aidreams, bad)
