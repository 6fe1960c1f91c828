"""lm-evaluation-harness (`lm_eval`, PyPI) against `pagedkv serve`, on small tasks made here (a
task YAML and a JSONL file, no hub download):
- a multiple-choice task through its `local-completions` model, with its remote tokenizer
  (`/tokenize`, `/detokenize`, `/tokenizer_info`): its accuracy and every per-choice
  log-likelihood equal the ones computed here from pagedkv's own echoed prompt log-probabilities;
- a generation task (`generate_until`) through its `local-chat-completions` model on SmolLM2 (a
  model with a chat template), with no tokenizer at all (`tokenizer_backend=None,
  tokenized_requests=False`: the server applies the chat template, so nothing comes from the
  hub): every answer equals the one this test gets from the same server for the same messages,
  and its exact_match score equals the one computed here from those answers.

lm_eval runs from its own environment (scripts/lm_eval_env.sh; its dependencies would clash with
the reference environment's pins): $PAGEDKV_LM_EVAL, else ~/.cache/pagedkv/lmeval/bin/lm_eval.
Skipped when it is not installed."""

from __future__ import annotations

import json
import os
import pathlib
import string
import subprocess

import pytest
from serve_util import Server

DOCS = [
    ("Once upon a time, there was a little", ["girl", "car", "cloud"], 0),
    ("The sun was shining and the birds were", ["singing", "eating", "blue"], 0),
    ("Lily went to the park with her", ["mom", "table", "seven"], 0),
    ("Tom was sad because he lost his", ["toy", "run", "happy"], 0),
    ("One day, a big dog saw a small", ["cat", "sing", "very"], 0),
    ("She opened the door and saw a", ["big", "ran", "the"], 0),
]


def _lm_eval() -> pathlib.Path:
    env = os.environ.get("PAGEDKV_LM_EVAL")
    path = pathlib.Path(env) if env else pathlib.Path.home() / ".cache/pagedkv/lmeval/bin/lm_eval"
    if not path.exists():
        pytest.skip(f"lm_eval is not installed at {path}: run scripts/lm_eval_env.sh")
    return path


def _run_lm_eval(lm_eval: pathlib.Path, args: list[str], task: str, d: pathlib.Path):
    """(results, samples) of one lm_eval run of `task` (defined under `d`)."""
    out = d / "out"
    env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false")
    run = subprocess.run(
        [str(lm_eval), *args, "--tasks", task, "--include_path", str(d), "--output_path",
         str(out), "--log_samples"], capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    results = json.loads(next(out.rglob("results_*.json")).read_text())
    samples = [json.loads(line) for line in next(out.rglob(f"samples_{task}_*.jsonl"))
               .read_text().splitlines()]
    return results, samples


def _write_task(d: pathlib.Path) -> None:
    with open(d / "mc.jsonl", "w") as f:
        for context, choices, label in DOCS:
            f.write(json.dumps({"context": context, "choices": choices, "label": label}) + "\n")
    (d / "pagedkv_mc.yaml").write_text(
        "task: pagedkv_mc\n"
        "dataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {d / 'mc.jsonl'}\n"
        "test_split: test\n"
        "output_type: multiple_choice\n"
        "doc_to_text: '{{context}}'\n"
        "doc_to_choice: '{{choices}}'\n"
        "doc_to_target: '{{label}}'\n"
        "metric_list:\n  - metric: acc\n")


def _own_loglikelihood(server: Server, context: str, continuation: str) -> tuple[float, bool]:
    """(log-likelihood, greedy) of the continuation: lm-eval's split (context alone, then context
    + continuation, no special tokens), scored from pagedkv's echoed prompt logprobs."""
    def encode(text):
        status, _, body = server.request("POST", "/tokenize",
                                         {"prompt": text, "add_special_tokens": False})
        assert status == 200
        return body["tokens"]
    context_ids, whole = encode(context), encode(context + continuation)
    status, _, body = server.request("POST", "/v1/completions",
                                     {"prompt": whole, "max_tokens": 0, "echo": True,
                                      "logprobs": 1, "temperature": 0})
    assert status == 200, body
    lp = body["choices"][0]["logprobs"]
    values = lp["token_logprobs"][len(context_ids):]
    tops = lp["top_logprobs"][len(context_ids):]
    return sum(values), all(v == max(top.values()) for v, top in zip(values, tops))


def test_lm_eval_accuracy_equals_pagedkvs_own(cli_module, aidreams_args, tmp_path):
    lm_eval = _lm_eval()
    _write_task(tmp_path)
    server = Server(cli_module, aidreams_args)
    try:
        results, samples = _run_lm_eval(lm_eval, [
            "--model", "local-completions", "--model_args",
            f"base_url={server.base_url}/v1/completions,tokenizer_backend=remote,"
            "tokenized_requests=True,model=aidreams260K.bin,num_concurrent=1,max_retries=1"],
            "pagedkv_mc", tmp_path)
        own_correct = 0
        for s in samples:
            context, choices, label = DOCS[s["doc_id"]]
            own = [_own_loglikelihood(server, context, " " + c) for c in choices]
            theirs = [(float(r[0][0]), r[0][1] == "True") for r in s["resps"]]
            assert [t[0] for t in theirs] == pytest.approx([o[0] for o in own], abs=1e-4)
            assert [t[1] for t in theirs] == [o[1] for o in own], s["doc_id"]
            scores = [o[0] for o in own]
            own_correct += int(max(range(len(scores)), key=scores.__getitem__) == label)
        assert len(samples) == len(DOCS)
        assert results["results"]["pagedkv_mc"]["acc,none"] == pytest.approx(own_correct / len(DOCS))
    finally:
        assert server.stop() == 0


# SmolLM2-135M answers the first two as asked and the others in a sentence, so the score is
# neither 0 nor 1.
QUESTIONS = [
    ("Say the word yes.", "Yes"),
    ("Type the word: banana", "Banana"),
    ("What is the capital of France? Answer with one word.", "Paris"),
    ("What is the opposite of hot? Answer with one word.", "Cold"),
    ("How many legs does a spider have? Answer with a number.", "8"),
    ("Type the word: apple", "apple"),
]
# The task's generation settings, as lm_eval sends them (until -> stop, max_gen_toks ->
# max_tokens) and as this test sends them itself.
STOP, MAX_TOKENS = ["\n", "."], 12


def _write_generation_task(d: pathlib.Path) -> None:
    with open(d / "gen.jsonl", "w") as f:
        for question, answer in QUESTIONS:
            f.write(json.dumps({"question": question, "answer": answer}) + "\n")
    (d / "pagedkv_gen.yaml").write_text(
        "task: pagedkv_gen\n"
        "dataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {d / 'gen.jsonl'}\n"
        "test_split: test\n"
        "output_type: generate_until\n"
        "doc_to_text: '{{question}}'\n"
        "doc_to_target: '{{answer}}'\n"
        f"generation_kwargs:\n  until: {json.dumps(STOP)}\n  max_gen_toks: {MAX_TOKENS}\n"
        "  do_sample: false\n  temperature: 0\n"
        "metric_list:\n  - metric: exact_match\n    aggregation: mean\n"
        "    higher_is_better: true\n    ignore_case: true\n    ignore_punctuation: true\n")


def _normalized(text: str) -> str:
    """exact_match's ignore_case and ignore_punctuation."""
    return text.lower().translate(str.maketrans("", "", string.punctuation))


def test_lm_eval_chat_generation_score_equals_pagedkvs_own(cli_module, smollm2_args,
                                                           openai_module, tmp_path):
    lm_eval = _lm_eval()
    _write_generation_task(tmp_path)
    server = Server(cli_module, smollm2_args)
    try:
        status, _, models = server.request("GET", "/v1/models")
        assert status == 200
        name = models["data"][0]["id"]
        results, samples = _run_lm_eval(lm_eval, [
            "--model", "local-chat-completions", "--apply_chat_template", "--model_args",
            f"base_url={server.base_url}/v1/chat/completions,model={name},"
            "tokenizer_backend=None,tokenized_requests=False,num_concurrent=1,max_retries=1"],
            "pagedkv_gen", tmp_path)
        client = openai_module.OpenAI(base_url=server.base_url + "/v1", api_key="unused")
        own_correct = 0
        for s in samples:
            question, answer = QUESTIONS[s["doc_id"]]
            messages = [{"role": "user", "content": question}]
            sent = s["arguments"]["gen_args_0"]["arg_0"][0]  # the messages lm_eval sent
            assert json.loads(sent) == messages
            own = client.chat.completions.create(
                model=name, messages=messages, max_tokens=MAX_TOKENS, temperature=0,
                stop=STOP, seed=1234).choices[0].message.content
            assert s["resps"][0][0] == own, s["doc_id"]
            own_correct += int(_normalized(own) == _normalized(answer))
        assert len(samples) == len(QUESTIONS)
        assert 0 < own_correct < len(QUESTIONS)  # a constant score would not be caught
        score = results["results"]["pagedkv_gen"]["exact_match,none"]
        assert score == pytest.approx(own_correct / len(QUESTIONS))
    finally:
        assert server.stop() == 0
