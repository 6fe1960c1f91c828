"""`pagedkv serve` driven by the real `openai` client: greedy text and ids equal `pagedkv
generate`'s on aidreams260K, TinyStories-656K and SmolLM2-135M (completions and chat, streamed and
not), 64 concurrent streams, the prefix cache through cached_tokens, salts, tokenize."""

from __future__ import annotations

import json
import subprocess
import threading

import pytest
from serve_util import Server


def _generate(cli, model_args, prompt, n, chat=False):
    """`pagedkv generate --json` of one prompt: (text, output ids)."""
    args = [str(cli), "generate", *model_args, "--prompt", prompt, "-n", str(n), "--json"]
    if chat:
        args.append("--chat")
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    o = json.loads(out.stdout)["outputs"][0]
    return o["text"], o["output_ids"]


def _streamed(stream):
    """Text, token ids and finish reason of a streamed completion (or chat) response."""
    text, ids, finish, usage = "", [], None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            delta = getattr(choice, "delta", None)
            text += (delta.content or "") if delta is not None else choice.text
            ids += (choice.model_extra or {}).get("token_ids") or []
            finish = choice.finish_reason or finish
    return text, ids, finish, usage


MODELS = ["aidreams_args", "tinystories_args", "smollm2_args"]
PROMPTS = {"aidreams_args": "Once upon a time", "tinystories_args": "Once upon a time, there was",
           "smollm2_args": "The capital of France is"}


@pytest.mark.parametrize("model", MODELS)
def test_greedy_completions_equal_generate(request, cli_module, openai_module, model):
    model_args = request.getfixturevalue(model)
    prompt, n = PROMPTS[model], 24
    want_text, want_ids = _generate(cli_module, model_args, prompt, n)
    server = Server(cli_module, model_args)
    try:
        client = openai_module.OpenAI(base_url=server.base_url + "/v1", api_key="unused")
        whole = client.completions.create(model="", prompt=prompt, max_tokens=n, temperature=0,
                                          extra_body={"return_token_ids": True})
        assert whole.choices[0].text == want_text
        assert whole.choices[0].model_extra["token_ids"] == want_ids
        assert whole.usage.completion_tokens == len(want_ids)
        stream = client.completions.create(model="", prompt=prompt, max_tokens=n, temperature=0,
                                           stream=True, stream_options={"include_usage": True},
                                           extra_body={"return_token_ids": True})
        text, ids, finish, usage = _streamed(stream)
        assert (text, ids) == (want_text, want_ids)
        assert finish == whole.choices[0].finish_reason
        assert usage.prompt_tokens == whole.usage.prompt_tokens
        assert usage.completion_tokens == len(want_ids)
    finally:
        assert server.stop() == 0


def test_chat_equals_generate_chat_on_smollm2(cli_module, openai_module, smollm2_args):
    question = "What is the capital of France?"
    want_text, want_ids = _generate(cli_module, smollm2_args, question, 24, chat=True)
    server = Server(cli_module, smollm2_args)
    try:
        client = openai_module.OpenAI(base_url=server.base_url + "/v1", api_key="unused")
        messages = [{"role": "user", "content": question}]
        whole = client.chat.completions.create(model="", messages=messages, temperature=0,
                                               max_completion_tokens=24,
                                               extra_body={"return_token_ids": True})
        assert whole.choices[0].message.role == "assistant"
        assert whole.choices[0].message.content == want_text
        assert whole.choices[0].model_extra["token_ids"] == want_ids
        stream = client.chat.completions.create(model="", messages=messages, temperature=0,
                                                max_tokens=24, stream=True,
                                                extra_body={"return_token_ids": True})
        assert _streamed(stream)[:2] == (want_text, want_ids)
    finally:
        assert server.stop() == 0


@pytest.fixture(scope="module")
def aidreams_server(cli_module, aidreams_args):
    server = Server(cli_module, [*aidreams_args, "--num-kv-blocks", "2048"])
    yield server
    assert server.stop() == 0


def test_64_concurrent_streams_match_sequential_and_free_the_pool(aidreams_server, openai_module):
    client = openai_module.OpenAI(base_url=aidreams_server.base_url + "/v1", api_key="unused",
                                  max_retries=0)
    prompts = [f"Once upon a time {w}" for w in
               ["there", "a cat", "in the", "the sky", "dreams", "we", "stars", "a girl"]]

    def run(prompt):
        stream = client.completions.create(model="aidreams260K.bin", prompt=prompt, max_tokens=48,
                                           temperature=0, stream=True)
        return _streamed(stream)[0]

    sequential = {p: run(p) for p in prompts}
    results, errors = [None] * 64, []

    def client_thread(i):
        try:
            results[i] = run(prompts[i % len(prompts)])
        except Exception as e:  # noqa: BLE001 - every failure is reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=client_thread, args=(i,)) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert results == [sequential[prompts[i % len(prompts)]] for i in range(64)]
    m = aidreams_server.metrics()
    assert m["pagedkv_kv_cache_usage_ratio"] == 0.0
    assert m["pagedkv_num_requests_running"] == 0
    assert m["pagedkv_requests_aborted_total"] == 0


def test_second_identical_request_hits_the_prefix_cache(aidreams_server, openai_module):
    client = openai_module.OpenAI(base_url=aidreams_server.base_url + "/v1", api_key="unused")
    prompt = "Echoes of a dream that the stars once sang to the sleeping sea, and then"
    first = client.completions.create(model="", prompt=prompt, max_tokens=16, temperature=0)
    second = client.completions.create(model="", prompt=prompt, max_tokens=16, temperature=0)
    assert second.choices[0].text == first.choices[0].text
    assert second.usage.prompt_tokens_details.cached_tokens > 0
    assert second.usage.prompt_tokens_details.cached_tokens < second.usage.prompt_tokens
    salted = client.completions.create(model="", prompt=prompt, max_tokens=16, temperature=0,
                                       extra_body={"cache_salt": "tenant-b"})
    assert salted.usage.prompt_tokens_details.cached_tokens == 0
    assert salted.choices[0].text == first.choices[0].text


def test_stop_strings_and_token_prompts(aidreams_server, openai_module):
    client = openai_module.OpenAI(base_url=aidreams_server.base_url + "/v1", api_key="unused")
    full = client.completions.create(model="", prompt="Once upon a time", max_tokens=40,
                                     temperature=0).choices[0].text
    stop = full[10:13]
    cut = client.completions.create(model="", prompt="Once upon a time", max_tokens=40,
                                    temperature=0, stop=[stop])
    assert cut.choices[0].text == full[:full.index(stop)]
    assert cut.choices[0].finish_reason == "stop"
    assert cut.choices[0].model_extra["stop_reason"] == stop
    streamed = _streamed(client.completions.create(model="", prompt="Once upon a time",
                                                   max_tokens=40, temperature=0, stop=[stop],
                                                   stream=True))
    assert streamed[0] == cut.choices[0].text and streamed[2] == "stop"
    status, _, tokens = aidreams_server.request("POST", "/tokenize", {"prompt": "Once upon a time"})
    assert status == 200 and tokens["count"] == len(tokens["tokens"])
    by_ids = client.completions.create(model="", prompt=tokens["tokens"], max_tokens=40,
                                       temperature=0)
    assert by_ids.choices[0].text == full
    status, _, text = aidreams_server.request("POST", "/detokenize", {"tokens": tokens["tokens"]})
    assert status == 200 and text["prompt"] == "Once upon a time"
    models = client.models.list()
    assert [m.id for m in models.data] == ["aidreams260K.bin"]


def test_seeded_sampling_is_reproducible(aidreams_server, openai_module):
    client = openai_module.OpenAI(base_url=aidreams_server.base_url + "/v1", api_key="unused")
    a = client.completions.create(model="", prompt="Once", max_tokens=30, temperature=0.9,
                                  seed=7).choices[0].text
    b = client.completions.create(model="", prompt="Once", max_tokens=30, temperature=0.9,
                                  seed=7).choices[0].text
    assert a == b
