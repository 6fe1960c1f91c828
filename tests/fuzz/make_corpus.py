#!/usr/bin/env python3
"""Writes the seed corpora of the libFuzzer targets in tests/fuzz into DIR/<target>/.

Every seed is made here from small, test-made data (never ../shared/data): trace lines, a tiny
llama2.c tokenizer and checkpoint, vLLM-format KV event batches, and random operation bytes.
The seeds only give the fuzzer a start; what it grows stays in DIR, outside the tree.

Usage: /usr/bin/python3 tests/fuzz/make_corpus.py DIR   (Debian's python3: msgpack)
"""
import gzip
import json
import os
import random
import struct
import sys

try:
    import msgpack
except ImportError:  # the event seeds are then skipped; the fuzzer starts from nothing
    msgpack = None

TRACE = (
    b'{"timestamp": 0, "input_length": 1000, "output_length": 7, "hash_ids": [1, 2]}\n'
    b'{"timestamp": 12.5, "input_length": 512, "output_length": 0, "hash_ids": [1]}\n'
    b'\n'
    b'{"hash_ids": [1, 2, 3], "output_length": 3, "input_length": 1025, "timestamp": 13}\n'
)
BAD_TRACE = b'{"timestamp": -1, "input_length": 2147483648, "hash_ids": [1]}\nnot json\n'


def write(directory, name, data):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


def trace_seeds(out):
    # FuzzedDataProvider reads integers from the end: a skip_bad_lines byte, then the block size.
    for i, text in enumerate([TRACE, BAD_TRACE]):
        write(out + "/mooncake_trace", f"seed{i}", text + bytes([i % 2, 15, 1]))
        write(out + "/mooncake_gzip", f"gz{i}", gzip.compress(text))
        write(out + "/mooncake_gzip", f"plain{i}", text)


def tokenizer_file(pieces):
    """A llama2.c tokenizer.bin: max_token_length, then (score, length, bytes) per piece."""
    data = struct.pack("<i", max(len(p) for p in pieces))
    for i, piece in enumerate(pieces):
        data += struct.pack("<fi", -float(i), len(piece)) + piece
    return data


def tokenizer_seeds(out):
    pieces = [b"<unk>", b"<s>", b"</s>", b" ", b"a", b"b", b"c", b"ab", b"abc", b" a", b" ab"]
    pieces += [b"<0x%02X>" % i for i in range(256)][:8]
    file = tokenizer_file(pieces)
    vocab_byte = bytes([len(pieces) - 3])
    for i, text in enumerate([b"abc cab", b"", b"a\x00b\x01"]):
        write(out + "/llama2c_tokenizer", f"seed{i}", vocab_byte + file + b"\xff\xfe" + text)


def checkpoint(dim, hidden, layers, heads, kv_heads, vocab, seq_len, shared):
    """A llama2.c checkpoint with small random weights in run.c's tensor order."""
    head = dim // heads
    rng = random.Random(1)
    counts = [vocab * dim, layers * dim, layers * dim * dim, layers * dim * kv_heads * head,
              layers * dim * kv_heads * head, layers * dim * dim, layers * dim,
              layers * dim * hidden, layers * hidden * dim, layers * dim * hidden, dim,
              seq_len * head // 2, seq_len * head // 2]
    if not shared:
        counts.append(vocab * dim)
    header = struct.pack("<7i", dim, hidden, layers, heads, kv_heads,
                         vocab if shared else -vocab, seq_len)
    payload = b"".join(struct.pack("<f", rng.uniform(-0.1, 0.1)) for _ in range(sum(counts)))
    return header + payload


def checkpoint_seeds(out):
    write(out + "/llama2c_checkpoint", "shared", checkpoint(8, 16, 1, 2, 1, 12, 8, True))
    write(out + "/llama2c_checkpoint", "unshared", checkpoint(8, 16, 2, 2, 2, 12, 8, False))


def event_seeds(out):
    if msgpack is None:
        return
    stored = {"type": "BlockStored", "block_hashes": [11, 12], "parent_block_hash": None,
              "token_ids": list(range(32)), "block_size": 16, "lora_id": None, "medium": "GPU",
              "lora_name": None}
    removed = {"type": "BlockRemoved", "block_hashes": [11], "medium": "GPU"}
    cleared = {"type": "AllBlocksCleared"}
    batch = {"ts": 2.0, "events": [stored, removed, cleared], "data_parallel_rank": 0}
    write(out + "/kv_event_decode", "map", msgpack.packb(batch))
    array = [2.0, [["BlockStored", [11, 12], None, list(range(32)), 16, None, "GPU", None],
                   ["BlockRemoved", [11], "GPU"], ["AllBlocksCleared"]], None]
    write(out + "/kv_event_decode", "array", msgpack.packb(array))


def safetensors_file(tensors, metadata=None):
    """A safetensors file: u64 header length, JSON header, then the tensors' bytes."""
    import json
    header, data = {}, b""
    for name, (dtype, shape, payload) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def hf_seeds(out):
    import json
    f32 = struct.pack("<6f", 0.5, -1, 2, 0.25, 3, -0.5)
    write(out + "/safetensors", "f32", safetensors_file(
        {"w": ("F32", [2, 3], f32)}, {"format": "pt"}))
    write(out + "/safetensors", "mixed", safetensors_file(
        {"a": ("F16", [2], struct.pack("<2e", 1.5, -2)),
         "b": ("BF16", [2], b"\x80\x3f\x00\xc0"), "c": ("F32", [1], struct.pack("<f", 7))}))
    config = {"architectures": ["LlamaForCausalLM"], "hidden_size": 16, "intermediate_size": 32,
              "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
              "vocab_size": 32, "max_position_embeddings": 64, "rms_norm_eps": 1e-5,
              "rope_theta": 10000.0, "tie_word_embeddings": True,
              "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                               "high_freq_factor": 4.0, "original_max_position_embeddings": 32}}
    generation = {"eos_token_id": [2, 3]}
    write(out + "/hf_config", "llama3",
          json.dumps(config).encode() + b"\xff\xfe" + json.dumps(generation).encode())
    qwen = dict(config, architectures=["Qwen2ForCausalLM"], rope_scaling=None)
    write(out + "/hf_config", "qwen2", json.dumps(qwen).encode())
    sentencepiece = {
        "added_tokens": [{"id": 0, "content": "<unk>", "special": True, "normalized": False,
                          "single_word": False, "lstrip": False, "rstrip": False},
                         {"id": 1, "content": "<s>", "special": True, "normalized": False,
                          "single_word": False, "lstrip": False, "rstrip": False}],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1],
                                                                   "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ",
                                                       "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "byte_fallback": True,
                  "fuse_unk": True, "ignore_merges": False,
                  "vocab": {"<unk>": 0, "<s>": 1, "\u2581": 2, "a": 3, "b": 4, "\u2581a": 5,
                            "ab": 6, "<0x41>": 7},
                  "merges": ["\u2581 a", "a b"]}}
    write(out + "/hf_tokenizer", "sentencepiece",
          json.dumps(sentencepiece).encode() + b"\xff\xfe" + b"ab a b\xc3\xa9A")
    bytelevel = {
        "added_tokens": [{"id": 5, "content": "<|end|>", "special": True, "normalized": False,
                          "single_word": False, "lstrip": False, "rstrip": False}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                           "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "byte_fallback": False,
                  "fuse_unk": False, "ignore_merges": False,
                  "vocab": {"a": 0, "b": 1, "\u0120": 2, "\u0120a": 3, "ab": 4},
                  "merges": [["\u0120", "a"], ["a", "b"]]}}
    write(out + "/hf_tokenizer", "bytelevel",
          json.dumps(bytelevel).encode() + b"\xff\xfe" + b"ab a<|end|> b")
    # The generic pipeline: normalizers and pre-tokenizers in sequence, a Split regex with the
    # constructs split_regex.h accepts (for the fuzzer to mutate), and a pathological one.
    generic = dict(bytelevel, normalizer={"type": "Sequence", "normalizers": [
        {"type": "NFKC"}, {"type": "Lowercase"}, {"type": "Strip", "strip_left": True,
                                                  "strip_right": False},
        {"type": "Replace", "pattern": {"Regex": r"\s{2,}"}, "content": " "}]},
        pre_tokenizer={"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": r"(?i:'s|'ll)|[^\r\n\p{L}\p{N}]?\p{L}+|"
                                                   r"\p{N}{1,3}|(?:a*|b)+?x|\s+(?!\S)|\s+"},
             "behavior": "MergedWithNext", "invert": False},
            {"type": "Punctuation", "behavior": "Contiguous"},
            {"type": "Digits", "individual_digits": False},
            {"type": "ByteLevel", "add_prefix_space": True, "use_regex": False}]})
    write(out + "/hf_tokenizer", "generic",
          json.dumps(generic).encode() + b"\xff\xfe" + "Ab  ｃ'S 1234 ﬁ!? \u00e9\n".encode())
    slow = dict(bytelevel, pre_tokenizer={"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": r"(a*)*b|(a|a)*c"}, "behavior": "Removed",
         "invert": True},
        {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]})
    write(out + "/hf_tokenizer", "pathological",
          json.dumps(slow).encode() + b"\xff\xfe" + b"a" * 3000)


def op_seeds(out):
    rng = random.Random(7)
    for target in ["block_pool", "kv_cache_manager", "chunk_index", "scheduler"]:
        for i, size in enumerate([32, 128, 512, 2048]):
            write(out + "/" + target, f"ops{i}", bytes(rng.randrange(256) for _ in range(size)))


def openai_seeds(out):
    # The first byte picks the parser: 0 completions, 1 chat, 2 tokenize, 3 detokenize.
    bodies = [
        (0, {"model": "m", "prompt": "Hi", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9,
             "seed": -3, "stop": ["\n", "END"], "stream": True,
             "stream_options": {"include_usage": True}, "ignore_eos": True,
             "stop_token_ids": [2], "return_token_ids": True, "cache_salt": "a", "n": 1}),
        (0, {"prompt": [[1, 5, 9]], "logprobs": None, "extra": {"x": [1, 2]}}),
        (1, {"messages": [{"role": "system", "content": "Be brief."},
                          {"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
             "max_completion_tokens": 4, "tools": [], "response_format": {"type": "text"}}),
        (2, {"prompt": "Hi", "add_special_tokens": False}),
        (3, {"tokens": [1, 2, 3]}),
    ]
    for i, (parser, body) in enumerate(bodies):
        write(out + "/openai_request", f"seed{i}", bytes([parser]) + json.dumps(body).encode())
    write(out + "/openai_request", "bad", b"\x00{\"prompt\": \"\xff\", \"n\": 2")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    trace_seeds(out)
    tokenizer_seeds(out)
    checkpoint_seeds(out)
    event_seeds(out)
    hf_seeds(out)
    op_seeds(out)
    openai_seeds(out)
    print(f"make_corpus: seeds written to {out}")


if __name__ == "__main__":
    main()
