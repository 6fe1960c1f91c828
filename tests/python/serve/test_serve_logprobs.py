"""`logprobs` of `pagedkv serve` through the real `openai` client: the served values equal the
log-softmax (float64) of the engine's own logits rows (`pagedkv.Engine` with return_logits, whose
rows tests/engine/runtime/engine_logprobs_test.cc checks against a float64 forward), for
completions and chat, streamed and not, cold and from the prefix cache; echo and vLLM's
prompt_logprobs against the engine's rows of every prompt prefix."""

from __future__ import annotations

import math

import numpy as np
import pytest
from serve_util import Server

import pagedkv

PROMPT = ("Once upon a time, there was a little girl named Lily. She loved to play outside in the park "
          "with her friends and her big brown dog. One day, she")
TOL = 1e-4


def _log_softmax(row: np.ndarray) -> np.ndarray:
    x = row.astype(np.float64)
    return x - x.max() - math.log(np.exp(x - x.max()).sum())


def _engine_rows(model_dir, prompt_tokens, n):
    """Greedy ids and log-softmax rows of the Python engine for `prompt_tokens`."""
    engine = pagedkv.Engine.load(str(model_dir), backend="cpu", return_logits=True)
    engine.add_request(prompt_tokens=prompt_tokens, max_new_tokens=n, stop_at_eos=False)
    ids, rows = [], []
    while engine.has_unfinished_requests():
        step = engine.step()
        for i, t in enumerate(step.tokens):
            ids.append(t.token)
            rows.append(_log_softmax(step.logits[i]))
    return ids, rows


@pytest.fixture(scope="module")
def tinystories(cli_module, tinystories_args):
    server = Server(cli_module, tinystories_args)
    yield server
    assert server.stop() == 0


def _check_completion_entries(lp, rows, ids, text, k, tokenizer):
    assert len(lp.tokens) == len(ids) == len(lp.token_logprobs) == len(lp.top_logprobs)
    assert "".join(lp.tokens) == text
    offsets = np.cumsum([0] + [len(t) for t in lp.tokens])[:-1].tolist()
    assert lp.text_offset == offsets
    for i, (token_id, row) in enumerate(zip(ids, rows)):
        assert abs(lp.token_logprobs[i] - row[token_id]) < TOL, i
        top = lp.top_logprobs[i]
        want = np.argsort(-row, kind="stable")[:k]
        # The top k and the sampled token (here the argmax, so one of them), most probable first.
        assert list(top.values()) == sorted(top.values(), reverse=True)
        assert len(top) == k
        for rank, token in enumerate(want):
            assert abs(list(top.values())[rank] - row[token]) < TOL, (i, rank)


def test_completion_logprobs_equal_the_engine_rows(tinystories, openai_module, tinystories_args):
    client = openai_module.OpenAI(base_url=tinystories.base_url + "/v1", api_key="unused")
    n, k = 12, 4
    whole = client.completions.create(model="", prompt=PROMPT, max_tokens=n, temperature=0,
                                      logprobs=k, extra_body={"return_token_ids": True,
                                                              "ignore_eos": True})
    choice = whole.choices[0]
    ids = choice.model_extra["token_ids"]
    prompt_ids = whole.model_extra["prompt_token_ids"]
    want_ids, rows = _engine_rows(tinystories_args[1], prompt_ids, n)
    assert ids == want_ids
    _check_completion_entries(choice.logprobs, rows, ids, choice.text, k, None)

    # Streamed: the chunks' entries concatenate to the same values.
    tokens, values = [], []
    for chunk in client.completions.create(model="", prompt=PROMPT, max_tokens=n, temperature=0,
                                           logprobs=k, stream=True,
                                           extra_body={"ignore_eos": True}):
        for c in chunk.choices:
            if c.logprobs is not None:
                tokens += c.logprobs.tokens
                values += c.logprobs.token_logprobs
    assert tokens == choice.logprobs.tokens
    assert np.allclose(values, choice.logprobs.token_logprobs, atol=TOL)

    # Served from the prefix cache: the same log-probabilities as the cold run.
    again = client.completions.create(model="", prompt=PROMPT, max_tokens=n, temperature=0,
                                      logprobs=k, extra_body={"ignore_eos": True})
    assert again.usage.prompt_tokens_details.cached_tokens > 0
    assert again.choices[0].logprobs.tokens == choice.logprobs.tokens
    assert np.allclose(again.choices[0].logprobs.token_logprobs, choice.logprobs.token_logprobs,
                       atol=TOL)


def test_sampled_tokens_report_raw_logprobs(tinystories, openai_module):
    """Temperature changes the draw, not the reported distribution (vLLM's raw_logprobs)."""
    client = openai_module.OpenAI(base_url=tinystories.base_url + "/v1", api_key="unused")
    hot = client.completions.create(model="", prompt=PROMPT, max_tokens=1, temperature=1.5,
                                    seed=3, logprobs=20).choices[0].logprobs
    cold = client.completions.create(model="", prompt=PROMPT, max_tokens=1, temperature=0,
                                     logprobs=20).choices[0].logprobs
    top_hot, top_cold = hot.top_logprobs[0], cold.top_logprobs[0]
    for token, value in top_cold.items():
        if token in top_hot:
            assert abs(top_hot[token] - value) < TOL
    assert hot.token_logprobs[0] <= 0.0


def test_chat_logprobs_on_smollm2(cli_module, openai_module, smollm2_args):
    server = Server(cli_module, smollm2_args)
    try:
        client = openai_module.OpenAI(base_url=server.base_url + "/v1", api_key="unused")
        messages = [{"role": "user", "content": "Name a colour. Answer with one word."}]
        whole = client.chat.completions.create(model="", messages=messages, max_tokens=8,
                                               temperature=0, logprobs=True, top_logprobs=3)
        content = whole.choices[0].logprobs.content
        # The end-of-turn token is listed (by its piece) but is not part of the text.
        ended = whole.choices[0].finish_reason == "stop"
        assert not ended or content[-1].token == "<|im_end|>"
        shown = content[:-1] if ended else content
        assert "".join(e.token for e in shown) == whole.choices[0].message.content
        for e in content:
            assert e.bytes == list(e.token.encode("utf-8"))
            assert len(e.top_logprobs) == 3
            values = [t.logprob for t in e.top_logprobs]
            assert values == sorted(values, reverse=True)
            assert e.top_logprobs[0].token == e.token  # greedy: the most probable token
            assert abs(e.top_logprobs[0].logprob - e.logprob) < TOL
        streamed = []
        for chunk in client.chat.completions.create(model="", messages=messages, max_tokens=8,
                                                    temperature=0, logprobs=True, stream=True):
            for c in chunk.choices:
                if c.logprobs is not None and c.logprobs.content:
                    streamed += [(e.token, e.logprob, e.top_logprobs) for e in c.logprobs.content]
        assert [t for t, _, _ in streamed] == [e.token for e in content]
        assert all(top == [] for _, _, top in streamed)  # top_logprobs defaults to 0
        assert np.allclose([v for _, v, _ in streamed], [e.logprob for e in content], atol=TOL)
        # vLLM's prompt_logprobs: the response's field, or the first chunk's when streamed.
        ask = dict(model="", messages=messages, max_tokens=2, temperature=0,
                   extra_body={"prompt_logprobs": 1})
        want = client.chat.completions.create(**ask).model_extra["prompt_logprobs"]
        chunks = list(client.chat.completions.create(**ask, stream=True))
        got = chunks[0].model_extra["prompt_logprobs"]
        assert len(got) == len(want) > 8 and got[0] is None
        for g, w in zip(got[1:], want[1:]):
            assert g.keys() == w.keys()
            assert all(abs(g[k]["logprob"] - w[k]["logprob"]) < TOL for k in g)
        assert all(c.model_extra.get("prompt_logprobs") is None for c in chunks[1:])
    finally:
        assert server.stop() == 0


def _prompt_rows(model_dir, prompt_ids):
    """Row i: log-softmax of the engine's logits after prompt_ids[:i + 1] (predicting token
    i + 1), each prefix run as its own request."""
    engine = pagedkv.Engine.load(str(model_dir), backend="cpu", return_logits=True)
    ids = [engine.add_request(prompt_tokens=prompt_ids[:i + 1], max_new_tokens=1,
                              stop_at_eos=False) for i in range(len(prompt_ids) - 1)]
    rows = {}
    while engine.has_unfinished_requests():
        step = engine.step()
        for i, t in enumerate(step.tokens):
            rows[t.request_id] = _log_softmax(step.logits[i])
    return [rows[i] for i in ids]


def test_echo_gives_the_prompt_logprobs_cold_or_cached(tinystories, openai_module,
                                                       tinystories_args):
    """lm-evaluation-harness's loglikelihood request: echo, logprobs 1, max_tokens 1."""
    client = openai_module.OpenAI(base_url=tinystories.base_url + "/v1", api_key="unused")
    client.completions.create(model="", prompt=PROMPT, max_tokens=1)  # caches the prompt
    echo = client.completions.create(model="", prompt=PROMPT, max_tokens=1, temperature=0,
                                     logprobs=1, echo=True,
                                     extra_body={"return_token_ids": True})
    choice = echo.choices[0]
    prompt_ids = echo.model_extra["prompt_token_ids"]
    lp = choice.logprobs
    assert choice.text.startswith(PROMPT)
    assert len(lp.tokens) == len(prompt_ids) + 1  # the prompt and the generated token
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    rows = _prompt_rows(tinystories_args[1], prompt_ids)
    for i in range(1, len(prompt_ids)):
        row = rows[i - 1]
        assert abs(lp.token_logprobs[i] - row[prompt_ids[i]]) < TOL, i
        best = max(lp.top_logprobs[i].values())
        assert abs(best - row.max()) < TOL, i
    assert lp.text_offset == np.cumsum([0] + [len(t) for t in lp.tokens])[:-1].tolist()
    # The continuation's log-likelihood as lm-evaluation-harness sums it.
    ctxlen = 5
    want = sum(rows[i - 1][prompt_ids[i]] for i in range(ctxlen, len(prompt_ids)))
    assert abs(sum(lp.token_logprobs[ctxlen:-1]) - want) < 1e-3
    # Echoed prompts are computed, not read from the cache, so the values above are the cold ones.
    assert echo.usage.prompt_tokens_details.cached_tokens == 0

    only = client.completions.create(model="", prompt=PROMPT, max_tokens=0, echo=True,
                                     extra_body={"prompt_logprobs": 2})
    assert only.choices[0].text == PROMPT and only.usage.completion_tokens == 0
    assert only.choices[0].finish_reason == "length"
    vllm = only.choices[0].model_extra["prompt_logprobs"]
    assert len(vllm) == len(prompt_ids) and vllm[0] is None
    for i in range(1, len(prompt_ids)):
        entry = vllm[i][str(prompt_ids[i])]
        assert abs(entry["logprob"] - rows[i - 1][prompt_ids[i]]) < TOL
        assert entry["rank"] == 1 + int((rows[i - 1] > rows[i - 1][prompt_ids[i]] + 1e-6).sum())


def _choice_chunks(chunks, index=0):
    return [c.choices[0] for c in chunks if c.choices and c.choices[0].index == index]


def test_streamed_echo_leads_with_the_prompt_cold_or_cached(tinystories, openai_module,
                                                            tinystories_args):
    """echo and prompt_logprobs with stream: true. The first chunk of each choice carries the
    echoed prompt, its logprob entries (then the generated tokens') and vLLM's prompt_logprobs;
    the chunks add up to the whole body, and the prompt's values are the cold ones although the
    prompt is cached."""
    client = openai_module.OpenAI(base_url=tinystories.base_url + "/v1", api_key="unused")
    client.completions.create(model="", prompt=PROMPT, max_tokens=1)  # caches the prompt
    ask = dict(model="", prompt=PROMPT, max_tokens=4, temperature=0, logprobs=2, echo=True,
               extra_body={"ignore_eos": True, "prompt_logprobs": 1, "return_token_ids": True})
    whole = client.completions.create(**ask).choices[0]
    chunks = list(client.completions.create(**ask, n=2, stream=True,
                                            stream_options={"include_usage": True}))
    prompt_ids = chunks[0].model_extra["prompt_token_ids"]
    rows = _prompt_rows(tinystories_args[1], prompt_ids)
    for index in (0, 1):
        mine = _choice_chunks(chunks, index)
        first = mine[0]
        assert first.text.startswith(PROMPT)
        # The prompt's entries, then those of the tokens that had arrived (at least the first).
        assert len(first.logprobs.tokens) > len(prompt_ids)
        assert first.logprobs.token_logprobs[0] is None and first.logprobs.top_logprobs[0] is None
        for i in range(1, len(prompt_ids)):
            assert abs(first.logprobs.token_logprobs[i] - rows[i - 1][prompt_ids[i]]) < TOL, i
        vllm = first.model_extra["prompt_logprobs"]
        assert len(vllm) == len(prompt_ids) and vllm[0] is None
        for i in range(1, len(prompt_ids)):
            got = vllm[i][str(prompt_ids[i])]["logprob"]
            assert abs(got - rows[i - 1][prompt_ids[i]]) < TOL, i
        assert all(c.model_extra.get("prompt_logprobs") is None for c in mine[1:])
        # The chunks add up to the whole body.
        assert "".join(c.text for c in mine) == whole.text
        entries = [e for c in mine for e in zip(c.logprobs.tokens, c.logprobs.text_offset)]
        assert entries == list(zip(whole.logprobs.tokens, whole.logprobs.text_offset))
        values = [v for c in mine for v in c.logprobs.token_logprobs]
        assert values[0] is None
        assert np.allclose(values[1:], whole.logprobs.token_logprobs[1:], atol=TOL)
        assert mine[-1].finish_reason == "length"
    usage = chunks[-1].usage
    assert usage.completion_tokens == 8 and usage.prompt_tokens == len(prompt_ids)
    assert usage.prompt_tokens_details.cached_tokens == 0  # computed, not read from the cache


def test_streamed_echo_with_max_tokens_0_is_the_prompt_alone(tinystories, openai_module):
    client = openai_module.OpenAI(base_url=tinystories.base_url + "/v1", api_key="unused")
    whole = client.completions.create(model="", prompt=PROMPT, max_tokens=0, echo=True,
                                      logprobs=0, temperature=0)
    chunks = list(client.completions.create(model="", prompt=PROMPT, max_tokens=0, echo=True,
                                            logprobs=0, temperature=0, stream=True,
                                            stream_options={"include_usage": True}))
    mine = _choice_chunks(chunks)
    assert "".join(c.text for c in mine) == PROMPT == whole.choices[0].text
    tokens = [t for c in mine for t in c.logprobs.tokens]
    assert tokens == whole.choices[0].logprobs.tokens  # the prompt's entries, nothing generated
    assert mine[-1].finish_reason == "length"
    assert chunks[-1].usage.completion_tokens == 0


def test_bad_logprobs_fields_are_refused(tinystories):
    for body, param in [({"prompt": "a", "logprobs": 21}, "logprobs"),
                        ({"prompt": "a", "logprobs": -1}, "logprobs"),
                        ({"prompt": "a", "top_logprobs": 2}, "top_logprobs"),
                        ({"prompt": "a", "prompt_logprobs": 21}, "prompt_logprobs"),
                        ({"prompt": "a", "max_tokens": 0}, "max_tokens")]:
        status, _, answer = tinystories.request("POST", "/v1/completions", body)
        assert status == 400 and answer["error"]["param"] == param, body
    status, _, answer = tinystories.request(
        "POST", "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 2})
    assert status == 400 and answer["error"]["param"] in ("top_logprobs", "messages")


def test_tokenizer_info_names_the_special_tokens(tinystories):
    """vLLM's GET /tokenizer_info, which lm-evaluation-harness's remote tokenizer reads."""
    status, _, info = tinystories.request("GET", "/tokenizer_info")
    assert status == 200
    assert info["bos_token"] == "<|start_story|>" and info["eos_token"] == "<|end_story|>"
    assert info["model_max_length"] == 512 and info["vocab_size"] == 2048
    status, _, ids = tinystories.request("POST", "/tokenize", {"prompt": info["eos_token"],
                                                               "add_special_tokens": False})
    assert status == 200 and len(ids["tokens"]) == 1  # the special token's piece encodes to it
