"""`n` > 1 through the real `openai` client: n samples of one prompt, added together so the
later ones take the first one's prompt KV (the prefix cache's hit counter shows the prompt's full
blocks read n - 1 times, not computed n times, and pagedkv_prompt_copied_tokens_total the partial
block copied), seeded choices reproducible, streamed chunks carrying their choice's index, usage
counting the prompt once."""

from __future__ import annotations

import re

import pytest
from serve_util import Server

PROMPT = ("Once upon a time, there was a little girl named Lily. She loved to play outside in the "
          "park with her friends and her big brown dog. One day, she found a shiny red ball "
          "under a tree and she was very happy.")


@pytest.fixture(scope="module")
def tinystories(cli_module, tinystories_args):
    server = Server(cli_module, tinystories_args)
    yield server
    assert server.stop() == 0


def _counter(server: Server, name: str) -> int:
    status, _, text = server.request("GET", "/metrics")
    assert status == 200
    return int(float(re.search(rf"^{name} (\S+)$", text, re.M).group(1)))


def _prefix_hits(server: Server) -> int:
    return _counter(server, "pagedkv_prefix_cache_hits_total")


def test_n_samples_share_the_prompt_blocks(tinystories, openai_module):
    client = openai_module.OpenAI(base_url=tinystories.base_url + "/v1", api_key="unused")
    before = _prefix_hits(tinystories)
    copied_before = _counter(tinystories, "pagedkv_prompt_copied_tokens_total")
    r = client.completions.create(model="", prompt=PROMPT + " A", max_tokens=12, n=4,
                                  temperature=0, extra_body={"ignore_eos": True})
    hits = _prefix_hits(tinystories) - before
    copied = _counter(tinystories, "pagedkv_prompt_copied_tokens_total") - copied_before
    assert [c.index for c in r.choices] == [0, 1, 2, 3]
    assert len({c.text for c in r.choices}) == 1  # greedy: the same sample four times
    assert r.usage.completion_tokens == 4 * 12
    assert r.usage.prompt_tokens > 32
    full_blocks = r.usage.prompt_tokens // 16 * 16
    assert hits >= 3 * full_blocks, (hits, full_blocks)  # read 3 times, computed once
    # The partial last block (all of it but the last token) copied into each later choice's own.
    assert copied == 3 * ((r.usage.prompt_tokens - 1) % 16), (copied, r.usage.prompt_tokens)


def test_seeded_choices_differ_and_reproduce(tinystories, openai_module):
    client = openai_module.OpenAI(base_url=tinystories.base_url + "/v1", api_key="unused")
    ask = dict(model="", prompt=PROMPT, max_tokens=16, n=5, temperature=1.0, seed=11,
               extra_body={"ignore_eos": True})
    a = [c.text for c in client.completions.create(**ask).choices]
    b = [c.text for c in client.completions.create(**ask).choices]
    assert a == b
    assert len(set(a)) > 1
    # Streamed: the chunks of each index concatenate to the same choice.
    streamed = {}
    usage = None
    for chunk in client.completions.create(**ask, stream=True,
                                           stream_options={"include_usage": True}):
        usage = chunk.usage or usage
        for c in chunk.choices:
            streamed[c.index] = streamed.get(c.index, "") + c.text
    assert [streamed[i] for i in range(5)] == a
    assert usage.completion_tokens == 5 * 16


def test_chat_n_and_refusals(cli_module, openai_module, smollm2_args):
    server = Server(cli_module, smollm2_args)
    try:
        client = openai_module.OpenAI(base_url=server.base_url + "/v1", api_key="unused")
        r = client.chat.completions.create(
            model="", messages=[{"role": "user", "content": "Say hello."}], max_tokens=6, n=3,
            temperature=0.8, seed=5)
        assert [c.index for c in r.choices] == [0, 1, 2]
        assert all(c.message.role == "assistant" for c in r.choices)
        for body, param in [({"prompt": "a", "n": 17}, "n"),
                            ({"prompt": "a", "n": 2, "best_of": 3}, "best_of")]:
            status, _, answer = server.request("POST", "/v1/completions", body)
            assert status == 400 and answer["error"]["param"] == param
    finally:
        assert server.stop() == 0


def test_max_n_flag(cli_module, aidreams_args):
    server = Server(cli_module, [*aidreams_args, "--max-n", "2"])
    try:
        status, _, _ = server.request("POST", "/v1/completions",
                                      {"prompt": "Once", "n": 2, "max_tokens": 2})
        assert status == 200
        status, _, answer = server.request("POST", "/v1/completions",
                                           {"prompt": "Once", "n": 3, "max_tokens": 2})
        assert status == 400 and answer["error"]["param"] == "n"
        assert "[1, 2]" in answer["error"]["message"]
    finally:
        assert server.stop() == 0
