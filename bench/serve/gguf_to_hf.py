"""Writes a Hugging Face directory (bf16 safetensors, config, tokenizer) made from a GGUF file,
for serving the same model with vLLM beside `pagedkv serve` (bench/serve/README.md).

transformers dequantizes the GGUF tensors (`gguf_file=`, `GgufConfig(dequantize=True)`); its tokenizer converter drops
SmolLM2's pre-tokenizer rule that splits every digit into its own token (the original
tokenizer.json has `Digits(individual_digits=True)` before the byte-level split), so the rule is
put back: both servers then see the same token ids for the same text.

Run with the vLLM environment's interpreter (bench/serve/vllm_cpu_env.sh), which has
transformers, tokenizers and torch; it installs `gguf` and `accelerate` there when missing:

    $VENV/bin/python bench/serve/gguf_to_hf.py MODEL.gguf OUT_DIR
"""
import argparse
import importlib.util
import json
import pathlib
import subprocess
import sys


def ensure_packages() -> None:
    """transformers' GGUF loading needs gguf and accelerate."""
    missing = [p for p in ("gguf", "accelerate") if importlib.util.find_spec(p) is None]
    if missing:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *missing], check=True)


def restore_digit_split(out: pathlib.Path) -> None:
    """Puts Digits(individual_digits=True) in front of the byte-level pre-tokenizer."""
    path = out / "tokenizer.json"
    tok = json.loads(path.read_text())
    pre = tok.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", [pre]) if pre.get("type") == "Sequence" else [pre]
    if any(s.get("type") == "Digits" for s in steps):
        return
    digits = {"type": "Digits", "individual_digits": True}
    tok["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [digits] + [s for s in steps if s]}
    path.write_text(json.dumps(tok, ensure_ascii=False, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("gguf", type=pathlib.Path)
    parser.add_argument("out", type=pathlib.Path)
    args = parser.parse_args()
    ensure_packages()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    folder, name = str(args.gguf.parent), args.gguf.name
    model = AutoModelForCausalLM.from_pretrained(
        folder, gguf_file=name, dtype=torch.bfloat16,
        quantization_config=GgufConfig(dequantize=True))  # dense weights, serializable
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    restore_digit_split(args.out)
    ids = AutoTokenizer.from_pretrained(args.out)("in 2026")["input_ids"]
    print(f"wrote {args.out}; 'in 2026' -> {ids}")


if __name__ == "__main__":
    main()
