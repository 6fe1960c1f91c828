"""vLLM's sampling fields through the real `openai` client (issue 42): logit_bias forces its token,
repetition_penalty changes the greedy text of a model that repeats itself, min_tokens keeps
generating past the model's EOS, top_k / min_p samples stay seeded with n > 1 and streaming, and
values outside vLLM's ranges get a 400 naming the field."""

from __future__ import annotations

import pytest
from serve_util import Server

PROMPT = "Once upon a time, there was a little girl named Lily. She"


@pytest.fixture(scope="module")
def tinystories(cli_module, tinystories_args):
    server = Server(cli_module, tinystories_args)
    yield server
    assert server.stop() == 0


@pytest.fixture(scope="module")
def client(tinystories, openai_module):
    return openai_module.OpenAI(base_url=tinystories.base_url + "/v1", api_key="unused")


def _streamed_text(stream) -> str:
    return "".join(c.choices[0].text for c in stream if c.choices)


def test_logit_bias_makes_its_token_come_out(client):
    for stream in (False, True):
        ask = dict(model="", prompt=PROMPT, max_tokens=6, temperature=0,
                   logit_bias={"100": 100}, extra_body={"return_token_ids": True})
        if not stream:
            ids = client.completions.create(**ask).choices[0].model_extra["token_ids"]
        else:
            ids = []
            for chunk in client.completions.create(**ask, stream=True):
                for c in chunk.choices:
                    ids += c.model_extra.get("token_ids") or []
        assert ids == [100] * 6, (stream, ids)
    # A negative bias takes the greedy choice away.
    plain = client.completions.create(model="", prompt=PROMPT, max_tokens=1, temperature=0,
                                      extra_body={"return_token_ids": True})
    first = plain.choices[0].model_extra["token_ids"][0]
    banned = client.completions.create(model="", prompt=PROMPT, max_tokens=1, temperature=0,
                                       logit_bias={str(first): -100},
                                       extra_body={"return_token_ids": True})
    assert banned.choices[0].model_extra["token_ids"][0] != first


def test_repetition_penalty_changes_the_greedy_text(client):
    ask = dict(model="", prompt=PROMPT, max_tokens=96, temperature=0,
               extra_body={"ignore_eos": True})
    plain = client.completions.create(**ask).choices[0].text
    words = plain.split()
    assert len(set(words)) < len(words)  # the greedy text repeats words
    penalized = client.completions.create(
        **{**ask, "extra_body": {"ignore_eos": True, "repetition_penalty": 1.5}}).choices[0].text
    assert penalized != plain
    streamed = _streamed_text(client.completions.create(
        **{**ask, "extra_body": {"ignore_eos": True, "repetition_penalty": 1.5}}, stream=True))
    assert streamed == penalized
    # presence / frequency penalties (OpenAI's own fields) change it too.
    assert client.completions.create(**ask, frequency_penalty=1.0).choices[0].text != plain


def test_min_tokens_keeps_generating_past_eos(client):
    ask = dict(model="", prompt=PROMPT, max_tokens=400, temperature=0)
    natural = client.completions.create(**ask)
    assert natural.choices[0].finish_reason == "stop"
    n0 = natural.usage.completion_tokens
    held = client.completions.create(**ask, extra_body={"min_tokens": n0 + 20})
    assert held.usage.completion_tokens >= n0 + 20
    assert held.choices[0].text.startswith(natural.choices[0].text.rstrip())
    # A stop string is looked for only after min_tokens tokens (vLLM's rule).
    first_word = natural.choices[0].text.split()[0]
    stopped = client.completions.create(**{**ask, "max_tokens": 8}, stop=[first_word])
    assert stopped.usage.completion_tokens <= 2
    kept = client.completions.create(**{**ask, "max_tokens": 8}, stop=[first_word],
                                     extra_body={"min_tokens": 8})
    assert kept.usage.completion_tokens == 8


def test_top_k_and_min_p_samples_reproduce_with_n_and_stream(client):
    ask = dict(model="", prompt=PROMPT, max_tokens=16, n=3, temperature=1.0, seed=7,
               extra_body={"top_k": 5, "min_p": 0.05, "ignore_eos": True})
    a = [c.text for c in client.completions.create(**ask).choices]
    b = [c.text for c in client.completions.create(**ask).choices]
    assert a == b and len(set(a)) > 1
    streamed = {}
    for chunk in client.completions.create(**ask, stream=True):
        for c in chunk.choices:
            streamed[c.index] = streamed.get(c.index, "") + c.text
    assert [streamed[i] for i in range(3)] == a
    # top_k 1 is greedy whatever the temperature.
    greedy = client.completions.create(model="", prompt=PROMPT, max_tokens=16, temperature=0,
                                       extra_body={"ignore_eos": True}).choices[0].text
    top1 = client.completions.create(model="", prompt=PROMPT, max_tokens=16, temperature=1.0,
                                     seed=3, extra_body={"top_k": 1, "ignore_eos": True})
    assert top1.choices[0].text == greedy


def test_integral_floats_are_integers(tinystories, client):
    """Clients send "top_k": 40.0; vLLM's pydantic fields take an integral float as the integer
    (and refuse 40.5, below). Every integer field: the same samples as with integers."""
    ints = dict(prompt=PROMPT, max_tokens=8, min_tokens=2, n=2, best_of=2, seed=5, top_k=40,
                logprobs=2, prompt_logprobs=1, temperature=1.0, ignore_eos=True)
    floats = {k: float(v) if isinstance(v, int) and not isinstance(v, bool) else v
              for k, v in ints.items()}
    status, _, want = tinystories.request("POST", "/v1/completions", ints)
    assert status == 200, want
    status, _, got = tinystories.request("POST", "/v1/completions", floats)
    assert status == 200, got
    assert [c["text"] for c in got["choices"]] == [c["text"] for c in want["choices"]]
    assert [c["logprobs"]["tokens"] for c in got["choices"]] == \
        [c["logprobs"]["tokens"] for c in want["choices"]]
    assert len(got["choices"]) == 2 and got["usage"]["completion_tokens"] == 16
    # Through the openai client too, the way such clients send it.
    a = client.completions.create(model="", prompt=PROMPT, max_tokens=8, seed=5, temperature=1.0,
                                  extra_body={"top_k": 40.0})
    b = client.completions.create(model="", prompt=PROMPT, max_tokens=8, seed=5, temperature=1.0,
                                  extra_body={"top_k": 40})
    assert a.choices[0].text == b.choices[0].text


@pytest.mark.parametrize("field", ["top_k", "n", "best_of", "max_tokens", "min_tokens", "seed",
                                   "logprobs", "prompt_logprobs", "top_logprobs"])
def test_a_fractional_integer_field_gets_a_400_naming_it(tinystories, field):
    for path, head in [("/v1/completions", {"prompt": PROMPT}),
                       ("/v1/chat/completions",
                        {"messages": [{"role": "user", "content": "Hi"}], "logprobs": True})]:
        if field == "top_logprobs" and path == "/v1/completions":
            continue  # a chat field
        if field == "logprobs" and path == "/v1/chat/completions":
            continue  # chat's logprobs is a boolean
        status, _, answer = tinystories.request("POST", path, {**head, field: 40.5})
        assert status == 400, (path, answer)
        assert answer["error"]["param"] == field, (path, answer)
        assert "fractional part" in answer["error"]["message"]


@pytest.mark.parametrize("body, param", [
    ({"top_k": -2}, "top_k"),
    ({"min_p": 1.5}, "min_p"),
    ({"repetition_penalty": 0}, "repetition_penalty"),
    ({"presence_penalty": 2.5}, "presence_penalty"),
    ({"frequency_penalty": -3}, "frequency_penalty"),
    ({"logit_bias": {"abc": 1}}, "logit_bias"),
    ({"logit_bias": {"100000": 1}}, "logit_bias"),
    ({"max_tokens": 4, "min_tokens": 5}, "min_tokens"),
    ({"bad_words": ["the"]}, "bad_words"),
])
def test_out_of_range_values_get_a_400_naming_the_field(tinystories, body, param):
    for path, head in [("/v1/completions", {"prompt": PROMPT}),
                       ("/v1/chat/completions",
                        {"messages": [{"role": "user", "content": "Hi"}]})]:
        status, _, answer = tinystories.request("POST", path, {**head, **body})
        if path.endswith("chat/completions") and status == 400 and \
                answer["error"]["param"] == "messages":
            continue  # the model has no chat template: refused before the sampling fields
        assert status == 400, answer
        assert answer["error"]["param"] == param


def test_chat_takes_the_fields_streamed_and_not(cli_module, openai_module, smollm2_args):
    server = Server(cli_module, smollm2_args)
    try:
        client = openai_module.OpenAI(base_url=server.base_url + "/v1", api_key="unused")
        ask = dict(model="", messages=[{"role": "user", "content": "Say hello."}], max_tokens=5,
                   temperature=0, logit_bias={"100": 100},
                   extra_body={"return_token_ids": True, "min_tokens": 5})
        whole = client.chat.completions.create(**ask)
        assert whole.choices[0].model_extra["token_ids"] == [100] * 5
        streamed = "".join(c.choices[0].delta.content or ""
                           for c in client.chat.completions.create(**ask, stream=True)
                           if c.choices)
        assert streamed == whole.choices[0].message.content
        plain = client.chat.completions.create(
            model="", messages=[{"role": "user", "content": "Say hello."}], max_tokens=24,
            temperature=0)
        penalized = client.chat.completions.create(
            model="", messages=[{"role": "user", "content": "Say hello."}], max_tokens=24,
            temperature=0, presence_penalty=2.0, extra_body={"repetition_penalty": 2.0})
        assert penalized.choices[0].message.content != plain.choices[0].message.content
        status, _, answer = server.request(
            "POST", "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "Hi"}], "logit_bias": {"49152": 1}})
        assert status == 400 and answer["error"]["param"] == "logit_bias"
    finally:
        assert server.stop() == 0
