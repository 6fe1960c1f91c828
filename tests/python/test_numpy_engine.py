"""examples/python/numpy_engine.py: a numpy llama2.c forward pass driven by pagedkv.Scheduler
gives `pagedkv generate`'s greedy ids on aidreams260K, and the prefix cache cut its prefill."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import numpy as np

import pagedkv
from conftest import source_dir

PROMPTS = [
    "Echoes of vectors unfold, a gentle",
    "Echoes of vectors unfold, a gentle hum of",
    "In the quiet",
]


def load_example():
    path = source_dir() / "examples" / "python" / "numpy_engine.py"
    spec = importlib.util.spec_from_file_location("numpy_engine", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["numpy_engine"] = module
    spec.loader.exec_module(module)
    return module


def cli_ids(cli, d, n, block_size):
    args = [str(cli), "generate", "--model", str(d / "aidreams260K.bin"), "--tokenizer",
            str(d / "tok512.bin"), "-n", str(n), "--block-size", str(block_size), "--print-ids"]
    for p in PROMPTS:
        args += ["--prompt", p]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    prompts = [list(map(int, l.split(":")[1].split())) for l in out.splitlines()
               if l.startswith("prompt ids:")]
    outputs = [list(map(int, l.split(":")[1].split())) for l in out.splitlines()
               if l.startswith("output ids:")]
    return prompts, outputs


def test_greedy_ids_match_pagedkv_generate(aidreams, cli):
    engine = load_example()
    weights = engine.load_llama2c(str(aidreams / "aidreams260K.bin"))
    tok = pagedkv.Tokenizer.load(str(aidreams / "tok512.bin"), weights.vocab_size)
    prompts = [tok.encode(p) for p in PROMPTS]
    expected_prompts, expected = cli_ids(cli, aidreams, n=32, block_size=8)
    assert prompts == expected_prompts
    run = engine.run_engine(weights, prompts, max_new_tokens=32, block_size=8, num_blocks=64)
    assert run.outputs == expected
    assert all(len(o) >= 1 for o in run.outputs)
    # The two prompts share "Echoes of vectors unfold, a": whole blocks of it are computed once.
    assert run.prefix_hit_tokens >= 8
    assert run.prefill_tokens == run.prompt_tokens - run.prefix_hit_tokens < run.prompt_tokens


def test_chunked_prefill_and_small_blocks_give_the_same_ids(aidreams):
    engine = load_example()
    weights = engine.load_llama2c(str(aidreams / "aidreams260K.bin"))
    tok = pagedkv.Tokenizer.load(str(aidreams / "tok512.bin"), weights.vocab_size)
    prompts = [tok.encode(p) for p in PROMPTS]
    a = engine.run_engine(weights, prompts, max_new_tokens=12, block_size=8)
    b = engine.run_engine(weights, prompts, max_new_tokens=12, block_size=4,
                          max_num_batched_tokens=5)
    assert a.outputs == b.outputs and b.steps > a.steps


def test_rope_is_a_rotation():
    engine = load_example()
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 8)).astype(np.float32)
    y = x.copy()
    engine.rope(y, np.arange(5), head_dim=4)
    np.testing.assert_allclose(np.linalg.norm(y, axis=1), np.linalg.norm(x, axis=1), rtol=1e-5)
    np.testing.assert_array_equal(y[0], x[0])  # position 0 is not rotated
