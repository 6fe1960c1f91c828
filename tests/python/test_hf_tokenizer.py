"""pagedkv's tokenizer.json BPE against Hugging Face `tokenizers` (skipped when that package is
not installed): TinyStories-656K's tokenizer (skipped without ../shared/data) and tokenizers
trained here by `tokenizers` itself in each supported style (SentencePiece-style with byte
fallback, Metaspace, byte-level with GPT-2's, Llama-3's, Qwen2's and SmolLM2's split and NFC); and the
Engine on the TinyStories-656K directory, against the CLI."""

from __future__ import annotations

import subprocess

import pytest

import pagedkv
from conftest import shared_data_dir

LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

CORPUS = [
    "Once upon a time, there was a little girl named Lily. She loved to play outside.",
    "The dog's ball rolled down the hill; they'll find it, won't they? I'm sure we'd try.",
    "Numbers: 12345 and 3.14159, 2024-06-01, 1,000,000 items.\nNew line\n\n  indented\ttab",
    "Café naïve résumé — Ελληνικά, русский, 日本語のテキスト, 한국어, عربى ٣٤٥ ½",
    "UPPER CASE WORDS'S AND MIXED Case'Ll'VE",
] * 20

TEXTS = [
    "Once upon a time",
    "  leading spaces and trailing  ",
    "The dog's bone isn't here, they're gone.",
    "HE'S SHOUTING'LL",
    "digits 1234567 and ٣٤٥٦",
    "line one\nline two\r\n\n\tTabbed   gap",
    "Café — 日本語 and emoji 🙂 here",
    "unseen ẞ letters ǅ and symbols ⟨∀⟩",
    "",
    " ",
    "a",
]


# Texts that begin with zero to three spaces, alone, after a special token and after a
# non-special added token: the decoders' leading-space rules differ exactly there.
SPACE_TEXTS = [lead + body for lead in ["", " ", "  ", "   "]
               for body in ["hi there", "<s>hi", "<s> hi", "<x>  hi", ""]]


@pytest.fixture
def tk():
    return pytest.importorskip("tokenizers")


def check_same(hf, ours: pagedkv.Tokenizer, texts=TEXTS):
    # pagedkv's decode drops special tokens, then runs the decoders (tokenizers 0.2x keeps some
    # special tokens even with skip_special_tokens, so they are removed here first).
    special = {i for i, t in hf.get_added_tokens_decoder().items() if t.special}
    for text in texts:
        want = hf.encode(text).ids
        assert ours.encode(text) == want, text
        plain = [i for i in want if i not in special]
        assert ours.decode(want, prev=ours.bos_id) == hf.decode(plain), text


def test_tinystories_tokenizer_matches(tk):
    path = shared_data_dir() / "tinystories656K" / "tokenizer.json"
    if not path.exists():
        pytest.skip("../shared/data/tinystories656K not found")
    hf = tk.Tokenizer.from_file(str(path))
    ours = pagedkv.Tokenizer.load_huggingface(str(path))
    check_same(hf, ours)
    texts = [t.replace("<s>", "<|start_story|>") for t in SPACE_TEXTS]
    check_same(hf, ours, texts)
    # Llama-2's decoder (Strip(start=1) after Fuse): the prepended space goes, the text's stay.
    ids = hf.encode("   hi").ids  # <|start_story|> "▁▁▁▁hi"
    assert hf.decode(ids[1:]) == "   hi"
    assert ours.decode(ids, prev=ours.bos_id) == "   hi"


def train_sentencepiece_style(tk, tmp_path):
    from tokenizers import decoders, models, normalizers, processors, trainers
    tok = tk.Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    special = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(0xC0, 0x100)]
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=400, special_tokens=special))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    path = tmp_path / "sp.json"
    tok.save(str(path))
    return tok, path


def test_sentencepiece_style_matches(tk, tmp_path):
    hf, path = train_sentencepiece_style(tk, tmp_path)
    check_same(hf, pagedkv.Tokenizer.load_huggingface(str(path)))


@pytest.mark.parametrize("scheme,split", [("first", False), ("always", True), ("never", False)])
def test_metaspace_style_matches(tk, tmp_path, scheme, split):
    from tokenizers import decoders, models, pre_tokenizers, processors, trainers
    tok = tk.Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme=scheme, split=split)
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    special = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(0xC0, 0x100)]
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=400, special_tokens=special))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    path = tmp_path / "metaspace.json"
    tok.save(str(path))
    texts = TEXTS + ["a<s>b <s> c", "<s>start"]
    ours = pagedkv.Tokenizer.load_huggingface(str(path))
    for text in texts:
        assert ours.encode(text) == tok.encode(text).ids, text


@pytest.mark.parametrize("scheme", ["first", "always", "never"])
@pytest.mark.parametrize("decoder", ["metaspace", "llama2"])
def test_leading_spaces_decode_as_tokenizers_does(tk, tmp_path, scheme, decoder):
    """The Metaspace pre-tokenizer with each prepend_scheme, and the Metaspace decoder of the same
    scheme or Llama-2's Sequence[Replace, ByteFallback, Fuse, Strip(start=1)], on texts that start
    with zero to three spaces, with special and non-special added tokens first."""
    from tokenizers import decoders, models, pre_tokenizers, processors, trainers
    tok = tk.Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme=scheme, split=False)
    if decoder == "metaspace":
        tok.decoder = decoders.Metaspace(prepend_scheme=scheme, split=False)
    else:
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                         decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    special = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(0x20, 0x100)]
    tok.train_from_iterator(CORPUS + ["  two  spaces   three"] * 5,
                            trainers.BpeTrainer(vocab_size=420, special_tokens=special))
    tok.add_tokens(["<x>"])  # an added token that is not special: decode keeps it
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    path = tmp_path / f"{decoder}_{scheme}.json"
    tok.save(str(path))
    check_same(tok, pagedkv.Tokenizer.load_huggingface(str(path)), SPACE_TEXTS + TEXTS)


NFC_TEXTS = [
    "e\u0301 cafe\u0301 o\u0308\u0304 \u1100\u1161\u11a8 \u1112\u1161 \uac00",
    "a\u0323\u0302 a\u0302\u0323 \u212b \u2126 \u0958 q\u0307\u0323",
    "\u0301 leading mark, \u00c5\u030a, \U0001d15e and \u0f73",
]


@pytest.mark.parametrize("split", ["gpt2", "llama3", "qwen2", "smollm"])
def test_byte_level_matches(tk, tmp_path, split):
    from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers, trainers
    tok = tk.Tokenizer(models.BPE(ignore_merges=split == "llama3"))
    if split == "qwen2":
        tok.normalizer = normalizers.NFC()
    if split == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    elif split == "smollm":  # SmolLM2-135M-Instruct's tokenizer.json
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    else:
        pattern = LLAMA3_SPLIT if split == "llama3" else QWEN2_SPLIT
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=500, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    path = tmp_path / f"{split}.json"
    tok.save(str(path))
    texts = TEXTS + ["with <|endoftext|> inside<|endoftext|>"]
    if split == "smollm":
        texts += ["a 12 b  345 x1y22 ٣٤ 7.5%", "2024-06-01T12:30"]
    if split == "qwen2":
        texts += NFC_TEXTS
        assert tok.encode(NFC_TEXTS[0]).ids != tok.encode(NFC_TEXTS[0].replace("\u0301", "")).ids
    check_same(tok, pagedkv.Tokenizer.load_huggingface(str(path)), texts)


def test_engine_loads_a_hugging_face_directory(cli):
    model = shared_data_dir() / "tinystories656K"
    if not (model / "config.json").exists():
        pytest.skip("../shared/data/tinystories656K not found")
    engine = pagedkv.Engine.load(str(model), backend="cpu")
    [result] = engine.generate([pagedkv.GenerationRequest(max_new_tokens=16)])
    assert result.prompt_tokens == [1]
    assert result.text.startswith("Once upon a time, there was a little girl named Lily.")
    out = subprocess.run([str(cli), "generate", "--model", str(model), "-n", "16", "--backend",
                          "cpu"], check=True, capture_output=True, text=True).stdout
    assert result.text in out
