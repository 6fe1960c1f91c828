"""Fixtures of the `pagedkv serve` tests: the CLI, the models it serves and the `openai` client
(from scripts/python_refs.sh's environment). serve_util.Server runs the real server process."""

from __future__ import annotations

import os
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parents[1]))
from test_gguf_smollm2 import smollm2_gguf_path  # noqa: E402  (the one model-file lookup)


@pytest.fixture(scope="module")
def cli_module() -> pathlib.Path:
    env = os.environ.get("PAGEDKV_CLI")
    p = pathlib.Path(env) if env else pathlib.Path(__file__).parents[3] / "build" / "pagedkv"
    if not p.exists():
        pytest.skip(f"the pagedkv CLI is not built at {p}")
    return p


def _shared() -> pathlib.Path:
    env = os.environ.get("PAGEDKV_SHARED_DATA_DIR")
    return pathlib.Path(env) if env else pathlib.Path(__file__).parents[4] / "shared" / "data"


@pytest.fixture(scope="module")
def aidreams_args() -> list[str]:
    d = _shared() / "aidreams260K"
    if not (d / "aidreams260K.bin").exists():
        pytest.skip(f"aidreams260K not found under {d}")
    return ["--model", str(d / "aidreams260K.bin"), "--tokenizer", str(d / "tok512.bin")]


@pytest.fixture(scope="module")
def tinystories_args() -> list[str]:
    d = _shared() / "tinystories656K"
    if not (d / "config.json").exists():
        pytest.skip(f"tinystories656K not found under {d}")
    return ["--model", str(d)]


@pytest.fixture(scope="module")
def smollm2_args() -> list[str]:
    if os.environ.get("PAGEDKV_SANITIZED") == "1":
        pytest.skip("sanitizer build: the 135M-parameter model is too slow under ASan/UBSan")
    path = smollm2_gguf_path()
    if path is None:
        pytest.skip("SmolLM2-135M-Instruct is not fetched: run scripts/fetch_models.sh")
    return ["--model", str(path)]


@pytest.fixture(scope="module")
def openai_module():
    try:
        import openai
    except ImportError:
        pytest.skip("the openai client is not installed: run scripts/python_refs.sh")
    return openai
