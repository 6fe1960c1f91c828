"""lm-evaluation-harness (`lm_eval`, PyPI) scores a small multiple-choice task, made here (a task
YAML and a JSONL file, no hub download), through its `local-completions` model against `pagedkv
serve`, with its remote tokenizer (`/tokenize`, `/detokenize`, `/tokenizer_info`). Its accuracy
and every per-choice log-likelihood equal the ones computed here from pagedkv's own echoed prompt
log-probabilities.

lm_eval runs from its own environment (scripts/lm_eval_env.sh; its dependencies would clash with
the reference environment's pins): $PAGEDKV_LM_EVAL, else ~/.cache/pagedkv/lmeval/bin/lm_eval.
Skipped when it is not installed."""

from __future__ import annotations

import json
import os
import pathlib
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
        out = tmp_path / "out"
        env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1",
                   TOKENIZERS_PARALLELISM="false")
        run = subprocess.run(
            [str(lm_eval), "--model", "local-completions", "--model_args",
             f"base_url={server.base_url}/v1/completions,tokenizer_backend=remote,"
             "tokenized_requests=True,model=aidreams260K.bin,num_concurrent=1,max_retries=1",
             "--tasks", "pagedkv_mc", "--include_path", str(tmp_path), "--output_path", str(out),
             "--log_samples"], capture_output=True, text=True, env=env, timeout=600)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        results = json.loads(next(out.rglob("results_*.json")).read_text())
        samples = [json.loads(line) for line in next(out.rglob("samples_pagedkv_mc_*.jsonl"))
                   .read_text().splitlines()]
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
