"""Decode tok/s of SmolLM2-135M-Instruct (49,152-token vocabulary) with and without vLLM's
sampling fields (issue 42), alternating, one request of 96 tokens after a 200-token prompt, one
thread of the CPU backend. Decode time is the request's latency minus its time to first token.

Usage: PYTHONPATH=build/python /usr/bin/python3 bench/engine/runtime/sampling_fields_cost.py
Environment: SMOLLM2_GGUF (default ~/.cache/pagedkv/models/SmolLM2-135M-Instruct.Q4_1.gguf)."""
import os
import time

import pagedkv

MODEL = os.environ.get(
    "SMOLLM2_GGUF", os.path.expanduser("~/.cache/pagedkv/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
KINDS = {
    "greedy": {},
    "greedy + penalties, logit_bias, min_tokens": dict(
        repetition_penalty=1.3, presence_penalty=0.5, frequency_penalty=0.5,
        logit_bias={42: 5.0}, min_tokens=64),
    "temperature 0.8": dict(temperature=0.8, seed=1),
    "temperature 0.8, top_k 40, min_p 0.05": dict(temperature=0.8, seed=1, top_k=40, min_p=0.05),
}


def main() -> None:
    engine = pagedkv.Engine.load(MODEL, backend="cpu", num_threads=1)
    prompt = list(range(1000, 1200))
    engine.generate([pagedkv.GenerationRequest(prompt_tokens=prompt, max_new_tokens=8,
                                               stop_at_eos=False)])  # warm-up
    rates = {k: [] for k in KINDS}
    for _ in range(4):
        for kind, fields in KINDS.items():
            request = pagedkv.GenerationRequest(prompt_tokens=prompt, max_new_tokens=96,
                                                stop_at_eos=False, **fields)
            start = time.perf_counter()
            result = engine.generate([request])[0]
            seconds = time.perf_counter() - start - result.time_to_first_token_s
            rates[kind].append(len(result.output_tokens) / seconds)
    for kind, values in rates.items():
        print(f"{kind}: " + " / ".join(f"{v:.1f}" for v in values) + " tok/s")


if __name__ == "__main__":
    main()
