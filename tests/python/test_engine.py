"""Engine and Tokenizer on aidreams260K (skipped when ../shared/data is absent), and engine
errors that need no model."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

import pagedkv


def test_load_errors():
    with pytest.raises(pagedkv.NotFoundError):
        pagedkv.Engine.load("/nonexistent/model.bin")
    with pytest.raises(pagedkv.InvalidArgumentError):
        pagedkv.Engine.load("/nonexistent/model.bin", backend="tpu")
    with pytest.raises(pagedkv.InvalidArgumentError, match="weights"):
        pagedkv.Engine.load("/nonexistent/model.bin", weights="int4")
    with pytest.raises(pagedkv.InvalidArgumentError, match="kv_cache_memory"):
        pagedkv.Engine.load("/nonexistent/model.bin", kv_cache_memory=-1)
    with pytest.raises(pagedkv.InvalidArgumentError, match="hybrid_kv_cache"):
        pagedkv.Engine.load("/nonexistent/model.bin", hybrid_kv_cache="maybe")


def test_threads_do_not_change_the_output(aidreams):
    with pytest.raises(pagedkv.InvalidArgumentError, match="num_threads"):
        pagedkv.Engine.load(str(aidreams / "aidreams260K.bin"), backend="cpu", num_threads=-1)
    outputs = []
    for threads in (1, 2, 0):
        e = pagedkv.Engine.load(str(aidreams / "aidreams260K.bin"), str(aidreams / "tok512.bin"),
                                backend="cpu", num_threads=threads)
        results = e.generate([pagedkv.GenerationRequest(prompt_text=p, max_new_tokens=16)
                              for p in ("Echoes of", "Echoes of vectors", "A gentle hum")])
        outputs.append([r.output_tokens for r in results])
    assert outputs[0] == outputs[1] == outputs[2]


@pytest.fixture
def engine(aidreams):
    return pagedkv.Engine.load(str(aidreams / "aidreams260K.bin"), str(aidreams / "tok512.bin"),
                               backend="cpu", block_size=8, return_logits=True)


def test_kv_cache_layout(engine, aidreams):
    layout = engine.kv_cache_layout
    assert layout["hybrid"] is False and layout["num_groups"] == 1
    assert "no sliding-window layers" in layout["reason"]
    with pytest.raises(pagedkv.InvalidArgumentError, match="hybrid_kv_cache is on"):
        pagedkv.Engine.load(str(aidreams / "aidreams260K.bin"), str(aidreams / "tok512.bin"),
                            backend="cpu", hybrid_kv_cache="on")


def test_quantized_kv_cache_dtype(aidreams, cli):
    """kv_cache_dtype quantizes the KV pages: kv_pool says so, the CLI gives the same tokens."""
    model, tok = str(aidreams / "aidreams260K.bin"), str(aidreams / "tok512.bin")
    bf16 = pagedkv.Engine.load(model, tok, backend="cpu", kv_cache_dtype="bf16",
                               kv_cache_memory=1 << 20)
    int8 = pagedkv.Engine.load(model, tok, backend="cpu", kv_cache_dtype="int8",
                               kv_cache_memory=1 << 20)
    assert int8.kv_pool["dtype"] == "int8" and bf16.kv_pool["dtype"] == "bf16"
    assert int8.kv_cache_layout["dtype"] == "int8"
# 4 layers x 2(K, V) x 4 KV heads x(16 + 2 scale bytes) against 16 x 2 bytes per row.
    assert int8.kv_pool["bytes_per_token"] == 4 * 2 * 4 * 18
    assert int8.kv_pool["tokens"] > 1.7 * bf16.kv_pool["tokens"]
    out = int8.generate([pagedkv.GenerationRequest(prompt_text="Echoes of", max_new_tokens=20)])
    args = [str(cli), "generate", "--model", model, "--tokenizer", tok, "-n", "20",
            "--print-ids", "--backend", "cpu", "--kv-cache-dtype", "int8", "--prompt", "Echoes of"]
    printed = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    assert " ".join(map(str, out[0].output_tokens)) in printed
    with pytest.raises(pagedkv.InvalidArgumentError, match="head_dim is 16"):
        pagedkv.Engine.load(model, tok, backend="cpu", kv_cache_dtype="q4_0")
    # K and V in their own dtypes (llama.cpp's -ctk / -ctv): each side's rows counted.
    mixed = pagedkv.Engine.load(model, tok, backend="cpu", kv_cache_dtype="bf16",
                                kv_cache_dtype_v="int8", kv_cache_memory=1 << 20)
    assert (mixed.kv_pool["dtype"], mixed.kv_pool["v_dtype"]) == ("bf16", "int8")
    assert mixed.kv_cache_layout["v_dtype"] == "int8"
    assert mixed.kv_pool["bytes_per_token"] == 4 * 4 * (16 * 2 + 18)
    out = mixed.generate([pagedkv.GenerationRequest(prompt_text="Echoes of", max_new_tokens=20)])
    args[args.index("--kv-cache-dtype"):args.index("--kv-cache-dtype") + 2] = [
        "--kv-cache-dtype-k", "bf16", "--kv-cache-dtype-v", "int8"]
    printed = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    assert " ".join(map(str, out[0].output_tokens)) in printed
    with pytest.raises(pagedkv.InvalidArgumentError, match="head_dim is 16"):
        pagedkv.Engine.load(model, tok, backend="cpu", kv_cache_dtype_v="q8_0")
    with pytest.raises(pagedkv.InvalidArgumentError, match="unknown dtype"):
        pagedkv.Engine.load(model, tok, backend="cpu", kv_cache_dtype="int3")


def test_disk_cache_survives_a_new_engine(aidreams, tmp_path):
    """disk_cache: a second Engine on the same folder loads the prompt's blocks from disk."""
    model, tok = str(aidreams / "aidreams260K.bin"), str(aidreams / "tok512.bin")
    request = pagedkv.GenerationRequest(prompt_text="Echoes of vectors and " * 6, max_new_tokens=8)
    first = pagedkv.Engine.load(model, tok, backend="cpu", block_size=8,
                                disk_cache=str(tmp_path), disk_cache_size=1 << 26)
    cold = first.generate([request])[0]
    assert cold.num_disk_hit_tokens == 0
    assert first.tier_stats["disk"]["stored_blocks"] + first.tier_stats["disk"]["resident_blocks"] > 0
    del first  # its writer finishes the files
    second = pagedkv.Engine.load(model, tok, backend="cpu", block_size=8,
                                 disk_cache=str(tmp_path), disk_cache_size=1 << 26,
                                 disk_cache_read_threads=3)
    warm = second.generate([request])[0]
    assert warm.num_disk_hit_tokens == warm.num_prefix_hit_tokens >= 8 * (len(warm.prompt_tokens) // 8 - 1)
    assert warm.output_tokens == cold.output_tokens
    assert second.stats.num_disk_hit_tokens == warm.num_disk_hit_tokens
    assert second.tier_stats["disk"]["hit_blocks"] == warm.num_disk_hit_tokens // 8
    with pytest.raises(pagedkv.InvalidArgumentError, match="capacity_bytes"):
        pagedkv.Engine.load(model, tok, backend="cpu", disk_cache=str(tmp_path), disk_cache_size=1)
    with pytest.raises(pagedkv.InvalidArgumentError, match="disk_cache_read_threads = 0"):
        pagedkv.Engine.load(model, tok, backend="cpu", disk_cache=str(tmp_path),
                            disk_cache_read_threads=0)


def test_generate_matches_cli(engine, aidreams, cli):
    prompts = ["Echoes of", "Echoes of vectors"]
    args = [str(cli), "generate", "--model", str(aidreams / "aidreams260K.bin"), "--tokenizer",
            str(aidreams / "tok512.bin"), "-n", "20", "--block-size", "8", "--print-ids",
            "--backend", "cpu"]
    for p in prompts:
        args += ["--prompt", p]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    expected = [list(map(int, l.split(":")[1].split())) for l in out.splitlines()
                if l.startswith("output ids:")]
    results = engine.generate([pagedkv.GenerationRequest(prompt_text=p, max_new_tokens=20)
                               for p in prompts])
    assert [r.output_tokens for r in results] == expected
    assert results[0].finish_reason in ("length", "stop") and results[0].text
    assert engine.tokenizer.decode(results[0].output_tokens,
                                   prev=results[0].prompt_tokens[-1]) == results[0].text
    stats = engine.stats
    assert stats.num_requests == 2 and stats.num_generated_tokens >= 2
#Bounded step statistics : the histogram counts every step, the maxima bound the batches.
    assert sum(stats.step_num_tokens_histogram) == stats.num_steps
    assert stats.max_step_num_tokens == max(stats.step_num_tokens)
    assert stats.max_step_num_seqs == 2 and stats.num_shifted_hit_tokens == 0


def test_step_and_stream(engine):
    rid = engine.add_request(prompt_text="Echoes of", max_new_tokens=5)
    step = engine.step()
    assert [t.request_id for t in step.tokens] == [rid] and step.tokens[0].index == 0
    assert step.logits.shape == (1, engine.vocab_size) and step.logits.dtype == np.float32
    assert int(np.argmax(step.logits[0])) == step.tokens[0].token  # greedy
    assert step.batch.num_scheduled_tokens == len(engine.tokenizer.encode("Echoes of"))
    rest = list(engine.stream())
    assert [t.index for t in rest] == list(range(1, len(rest) + 1)) and len(rest) <= 4
    assert not engine.has_unfinished_requests()
    again = list(engine.stream([pagedkv.GenerationRequest(prompt_text="Echoes of",
                                                          max_new_tokens=5)]))
    assert [t.token for t in again] == [step.tokens[0].token] + [t.token for t in rest]


def test_engine_errors_change_nothing(engine):
    with pytest.raises(pagedkv.InvalidArgumentError):
        engine.add_request(prompt_tokens=[1, 9999])
    with pytest.raises(pagedkv.InvalidArgumentError):
        engine.add_request(prompt_tokens=[1, 5], max_new_tokens=0)
    with pytest.raises(pagedkv.InvalidArgumentError, match="context"):
        engine.add_request(prompt_tokens=[1] * 100, max_new_tokens=100)
    assert not engine.has_unfinished_requests()
    with pytest.raises(pagedkv.NotFoundError):
        engine.abort_request(12345)
    rid = engine.add_request(prompt_tokens=[1, 5, 6], max_new_tokens=8)
    engine.abort_request(rid)
    finished = engine.step().finished
    assert [(r.request_id, r.finish_reason) for r in finished] == [(rid, "aborted")]


def test_tokenizer_roundtrip(aidreams):
    tok = pagedkv.Tokenizer.load(str(aidreams / "tok512.bin"), 512)
    ids = tok.encode("Echoes of vectors")
    assert ids[0] == tok.bos_id == 1 and tok.decode(ids) == "Echoes of vectors"
    assert tok.encode("", add_bos=True) == [1]
    with pytest.raises(pagedkv.InvalidArgumentError):
        tok.decode([600])
    with pytest.raises(pagedkv.InvalidArgumentError):
        pagedkv.Tokenizer.load(str(aidreams / "tok512.bin"), 300)


def test_generate_releases_the_gil_and_refuses_a_second_thread(engine):
    """While generate() runs in one thread (GIL released), this thread keeps running, and a call
    into the same engine from it raises RuntimeError instead of racing."""
    import threading

    requests = [pagedkv.GenerationRequest(prompt_tokens=[1, 5 + i], max_new_tokens=100,
                                          stop_at_eos=False) for i in range(4)]
    results = []
    worker = threading.Thread(target=lambda: results.append(engine.generate(requests)))
    refused = 0
    worker.start()
    while worker.is_alive():
        try:
            engine.has_unfinished_requests()
        except RuntimeError as e:
            assert "busy" in str(e)
            refused += 1
    worker.join()
    assert refused > 0
    assert [len(r.output_tokens) for r in results[0]] == [100] * 4
    assert not engine.has_unfinished_requests()  # usable again afterwards


def test_readmission_counters_after_preemption(aidreams):
#Eight prompts on a 36 - block pool preempt requests; each re - admission looks its prompt and
#generated tokens up again, counted apart from the first admission's prefix hits.
    def run(**kwargs):
        e = pagedkv.Engine.load(str(aidreams / "aidreams260K.bin"), str(aidreams / "tok512.bin"),
                                backend="cpu", block_size=4, **kwargs)
        prompts = ["Once upon a time", "The little dog", "A girl named Lily", "In a small town",
                   "One day, a boy", "The sun was", "Tom and Sue", "There was a big tree"]
        results = e.generate([pagedkv.GenerationRequest(prompt_text=p, max_new_tokens=100)
                              for p in prompts])
        return results, e.stats

    results, stats = run(num_kv_blocks=36)
    plain, _ = run(enable_prefix_caching=False)
    assert [r.output_tokens for r in results] == [r.output_tokens for r in plain]
    assert stats.num_preemptions > 0 and stats.num_readmissions == stats.num_preemptions
    assert stats.num_readmission_hit_tokens == sum(r.num_readmission_hit_tokens for r in results)
    assert stats.num_readmission_hit_tokens <= stats.num_readmission_tokens
    for r in results:
        assert r.num_readmission_hit_tokens == (r.num_readmission_device_hit_tokens
                                                + r.num_readmission_host_hit_tokens
                                                + r.num_readmission_remote_hit_tokens)
        assert r.num_readmission_host_hit_tokens == r.num_readmission_remote_hit_tokens == 0
        assert r.as_dict()["num_readmission_hit_tokens"] == r.num_readmission_hit_tokens
#No tiers here : nothing is loaded from the host or the remote tier.
    assert stats.num_host_hit_tokens == stats.num_readmission_host_hit_tokens == 0
    assert stats.num_remote_hit_tokens == stats.num_readmission_remote_hit_tokens == 0
    assert stats.as_dict()["num_readmissions"] == stats.num_readmissions


def test_logprobs_and_prompt_logprobs(engine):
    """logprobs=N on each TokenOutput, prompt_logprobs=N on the result; both log_softmax of the
    raw logits rows (the step's logits for the generated tokens)."""
    rid = engine.add_request(prompt_text="Echoes of", max_new_tokens=4, logprobs=3,
                             prompt_logprobs=2, stop_at_eos=False)
    finished, first_prompt_logprobs = [], []
    while engine.has_unfinished_requests():
        step = engine.step()
        for i, t in enumerate(step.tokens):
            assert (t.prompt_logprobs is not None) == (t.index == 0)  # the first token carries them
            if t.index == 0:
                first_prompt_logprobs = t.prompt_logprobs
            row = step.logits[i].astype(np.float64)
            want = row - row.max() - np.log(np.exp(row - row.max()).sum())
            logprob, top = t.logprobs
            assert abs(logprob - want[t.token]) < 1e-4
            assert [tok for tok, _ in top] == list(np.argsort(-want, kind="stable")[:3])
            assert top[0][0] == t.token  # greedy
        finished += [r for r in step.finished if r.request_id == rid]
    result = finished[0]
    assert len(result.prompt_logprobs) == len(result.prompt_tokens) - 1
    assert all(lp <= 0.0 and len(top) == 2 for lp, top in result.prompt_logprobs)
    assert first_prompt_logprobs == result.prompt_logprobs
    with pytest.raises(pagedkv.InvalidArgumentError, match="prompt_logprobs"):
        engine.add_request(prompt_text="x", prompt_logprobs=21)


def test_vllm_sampling_fields(engine):
    """top_k, min_p, the penalties, logit_bias and min_tokens reach the engine: a bias of 100
    forces its token while the logprobs stay the raw rows'; top_k=1 samples greedily; a repetition
    penalty follows the hand-applied rule on the step's raw logits; bad values are refused naming
    the field."""
    greedy = engine.generate([pagedkv.GenerationRequest(prompt_text="Echoes of", max_new_tokens=6,
                                                        stop_at_eos=False)])[0].output_tokens
    top1 = engine.generate([pagedkv.GenerationRequest(
        prompt_text="Echoes of", max_new_tokens=6, stop_at_eos=False, temperature=1.0, seed=3,
        top_k=1)])[0].output_tokens
    assert top1 == greedy
    forced = 1 + (greedy[0] + 1) % 300
    rid = engine.add_request(prompt_text="Echoes of", max_new_tokens=4, stop_at_eos=False,
                             logit_bias={forced: 100.0}, logprobs=0)
    penal = engine.add_request(prompt_text="Echoes of", max_new_tokens=6, stop_at_eos=False,
                               repetition_penalty=1.5, frequency_penalty=0.5)
    prompt = None
    output = []
    while engine.has_unfinished_requests():
        step = engine.step()
        for i, t in enumerate(step.tokens):
            row = step.logits[i].astype(np.float64)
            if t.request_id == rid:
                assert t.token == forced
                want = row - row.max() - np.log(np.exp(row - row.max()).sum())
                assert abs(t.logprobs[0] - want[forced]) < 1e-4 and t.logprobs[0] < -0.5
            if t.request_id == penal:
                prompt = prompt or engine.tokenizer.encode("Echoes of")
                for v in set(prompt) | set(output):
                    row[v] = row[v] / 1.5 if row[v] > 0 else row[v] * 1.5
                for v in set(output):
                    row[v] -= 0.5 * output.count(v)
                assert t.token == int(np.argmax(row))
                output.append(t.token)
    assert len(output) == 6
    for kwargs, field in [({"top_k": -2}, "top_k"), ({"min_p": 2.0}, "min_p"),
                          ({"repetition_penalty": 0.0}, "repetition_penalty"),
                          ({"presence_penalty": 3.0}, "presence_penalty"),
                          ({"logit_bias": {10**6: 1.0}}, "logit_bias"),
                          ({"min_tokens": 9}, "min_tokens")]:
        with pytest.raises(pagedkv.InvalidArgumentError, match=field):
            engine.add_request(prompt_text="a", max_new_tokens=4, **kwargs)


def test_samples_of_one_prompt_take_its_kv(engine, aidreams):
    """GenerationRequest.prompt_source: the samples sample what each would alone."""
    prompt = "Echoes of vectors and tensors in a quiet room"

    def sample(i, source=0):
        r = pagedkv.GenerationRequest(prompt_text=prompt, max_new_tokens=10, temperature=0.9,
                                      seed=40 + i)
        r.prompt_source = source
        return r

    first = engine.add_request(sample(0))
    ids = [first] + [engine.add_request(sample(i, first)) for i in (1, 2)]
    together = {rid: [] for rid in ids}
    for t in engine.stream():
        together[t.request_id].append(t.token)
    for i, rid in enumerate(ids):
        alone = pagedkv.Engine.load(str(aidreams / "aidreams260K.bin"),
                                    str(aidreams / "tok512.bin"), backend="cpu", block_size=8)
        [result] = alone.generate([sample(i)])
        assert together[rid] == result.output_tokens, i
    other = engine.add_request(sample(0))
    bad = pagedkv.GenerationRequest(prompt_text="another prompt", max_new_tokens=2)
    bad.prompt_source = other
    with pytest.raises(pagedkv.InvalidArgumentError, match="prompt_source"):
        engine.add_request(bad)
