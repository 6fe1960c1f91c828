"""The real SmolLM2-135M-Instruct GGUF file (scripts/fetch_models.sh) against llama.cpp's own
reader, the PyPI package `gguf`: every tensor pagedkv dequantizes equals gguf's; and the GGUF
tokenizer encodes exactly as the PyPI package `tokenizers` does when built from the same
metadata (vocabulary, merges, pre-tokenizer, control tokens). Skipped when the file is not
fetched, when `gguf` / `tokenizers` are not installed, and under a sanitizer build (the file is
98 MB of weights: too slow there)."""

from __future__ import annotations

import os
import pathlib

import numpy as np
import pytest

import pagedkv

SMOLLM2_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf_path() -> pathlib.Path | None:
    """The one lookup of the model file: $PAGEDKV_SMOLLM2_GGUF, then the fetch_models.sh cache
    ${PAGEDKV_MODEL_CACHE:-${XDG_CACHE_HOME:-~/.cache}/pagedkv/models}."""
    env = os.environ.get("PAGEDKV_SMOLLM2_GGUF")
    if env:
        return pathlib.Path(env) if pathlib.Path(env).is_file() else None
    cache = os.environ.get("PAGEDKV_MODEL_CACHE")
    if not cache:
        xdg = os.environ.get("XDG_CACHE_HOME") or str(pathlib.Path.home() / ".cache")
        cache = str(pathlib.Path(xdg) / "pagedkv" / "models")
    path = pathlib.Path(cache) / SMOLLM2_NAME
    return path if path.is_file() else None


@pytest.fixture(scope="module")
def model_path() -> pathlib.Path:
    if os.environ.get("PAGEDKV_SANITIZED") == "1":
        pytest.skip("sanitizer build: the 135M-parameter model is too slow under ASan/UBSan")
    path = smollm2_gguf_path()
    if path is None:
        pytest.skip(f"{SMOLLM2_NAME} is not fetched: run scripts/fetch_models.sh "
                    "(or set PAGEDKV_SMOLLM2_GGUF)")
    return path


@pytest.fixture(scope="module")
def reader(model_path):
    gguf = pytest.importorskip("gguf")
    return gguf.GGUFReader(str(model_path))


def field_value(reader, key):
    f = reader.fields[key]
    return f.contents() if hasattr(f, "contents") else f.parts[f.data[0]]


def test_every_tensor_equals_gguf_dequantization(model_path, reader):
    from gguf import quants
    ours = pagedkv.GgufFile(str(model_path))
    names = ours.tensor_names()
    assert names == [t.name for t in reader.tensors]
    assert len(names) == 272
    kinds = set()
    for t in reader.tensors:
        want = quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        got = ours.read_tensor(t.name)
        assert ours.tensor_type(t.name) == int(t.tensor_type), t.name
        assert got.shape == want.shape, t.name
        np.testing.assert_array_equal(got, want, err_msg=t.name)
        kinds.add(t.tensor_type.name)
    assert kinds == {"F32", "Q8_0", "Q4_1"}


def hf_tokenizer_from_gguf(reader):
    """A `tokenizers` BPE built from the GGUF metadata as llama.cpp reads it for pre 'smollm':
    each digit alone, then GPT-2's byte-level split; control tokens (type 3) special."""
    tk = pytest.importorskip("tokenizers")
    assert field_value(reader, "tokenizer.ggml.model") == "gpt2"
    assert field_value(reader, "tokenizer.ggml.pre") == "smollm"
    tokens = field_value(reader, "tokenizer.ggml.tokens")
    types = field_value(reader, "tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in field_value(reader, "tokenizer.ggml.merges")]
    model = tk.models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges)
    tok = tk.Tokenizer(model)
    tok.pre_tokenizer = tk.pre_tokenizers.Sequence([
        tk.pre_tokenizers.Digits(individual_digits=True),
        tk.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = tk.decoders.ByteLevel()
    tok.add_special_tokens([tk.AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(tokens, types) if ty == 3])
    return tok


TEXTS = [
    "The capital of France is Paris.",
    "Once upon a time, there was a little girl named Lily. She loved to play outside!",
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "for (int i = 0; i < 10; ++i) { sum += a[i] * 2.5f; }  // 12345",
    "Numbers 3.14159, 2024-06-01 and 1,000,000 items; year 1999.",
    "Café naïve résumé — Ελληνικά, русский, 日本語のテキスト, 한국어, عربى ٣٤٥ ½ 🙂",
    "   leading spaces, trailing   ",
    "line one\nline two\r\n\n\n\tTabbed    gap\n ",
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "HE'S SHOUTING'LL they'll we'd I'm",
    "",
    " ",
    "\n\n",
]


def test_tokenizer_equals_tokenizers_built_from_the_metadata(model_path, reader):
    want_tok = hf_tokenizer_from_gguf(reader)
    ours = pagedkv.GgufFile(str(model_path)).tokenizer()
    assert ours.vocab_size == 49152
    for text in TEXTS:
        want = want_tok.encode(text, add_special_tokens=False).ids
        got = ours.encode(text, add_bos=True)  # add_bos_token is false: nothing is prepended
        assert got == want, repr(text)
        assert ours.decode(got) == want_tok.decode(want, skip_special_tokens=True), repr(text)


def test_chat_prompt_uses_the_models_chatml(model_path):
    template = pagedkv.read_chat_template(str(model_path))
    prompt = pagedkv.format_chat_prompt(template, "Hi")
    assert prompt == ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
                      "Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                      "<|im_start|>assistant\n")
    with pytest.raises(pagedkv.InvalidArgumentError, match="Llama-3"):
        pagedkv.format_chat_prompt("{{ '<|start_header_id|>' }}", "Hi")


def test_native_and_f32_weights_give_the_same_greedy_ids(model_path):
    """Engine.load(weights=..., activations=...) reaches EngineOptions: the file's Q4_1 blocks
    kept native (the default) times fp32 activations and converted to fp32 give the same greedy
    continuation; with int8 activations (the default) the answer is still right;
    kv_cache_memory sizes the pool."""
    outputs = []
    for weights, activations in (("native", "f32"), ("f32", "f32"), ("native", "int8")):
        e = pagedkv.Engine.load(str(model_path), backend="cpu", weights=weights,
                                activations=activations, kv_cache_memory=32 << 20)
        result = e.generate([pagedkv.GenerationRequest(prompt_text="The capital of France is",
                                                       max_new_tokens=8)])[0]
        outputs.append(result)
    assert len(outputs[0].output_tokens) == 8
    assert outputs[0].output_tokens == outputs[1].output_tokens
    assert "Paris" in outputs[2].text
    with pytest.raises(pagedkv.InvalidArgumentError, match="activations"):
        pagedkv.Engine.load(str(model_path), backend="cpu", activations="int4")


def test_int8_kernel_is_forced_and_named(model_path):
    """Engine.load(int8_kernel=...) forces the CPU's int8 kernel: the portable loop gives the
    default kernel's tokens, backend_name says which ran, an unknown name is refused."""
    outputs = []
    for kernel in ("portable", "auto"):
        e = pagedkv.Engine.load(str(model_path), backend="cpu", int8_kernel=kernel,
                                kv_cache_memory=32 << 20)
        if kernel == "portable":
            assert "int8 activations (portable)" in e.backend_name
        outputs.append(e.generate([pagedkv.GenerationRequest(
            prompt_text="The capital of France is", max_new_tokens=6)])[0].output_tokens)
    assert outputs[0] == outputs[1]
    with pytest.raises(pagedkv.InvalidArgumentError, match="ForceInt8Kernel"):
        pagedkv.Engine.load(str(model_path), backend="cpu", int8_kernel="vnni9")
