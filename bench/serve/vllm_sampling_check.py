"""Checks pagedkv's logit edits (engine/model/runner/logit_edits.h) against vLLM itself: vLLM
generates greedily with each issue-42 field set, once returning its raw logits and once its
processed logits (logprobs_mode raw_logits / processed_logits, top 20 per step); the processed
value of every token in both top-20 lists must equal pagedkv's rule applied to the raw one
(min_tokens -inf for EOS, + logit_bias, repetition: positive / r else x r over prompt + output,
- frequency x count - presence over the output), in float32.

Runs in vLLM's environment (bench/serve/vllm_cpu_env.sh) on a Hugging Face directory, e.g. the
bf16 SmolLM2 that bench/serve/gguf_to_hf.py writes:
  $VENV/bin/python bench/serve/vllm_sampling_check.py /tmp/smollm2-hf
Prints one line per case and exits 1 on a mismatch larger than 1e-4."""
import json
import math
import os
import sys

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

CASES = [
    ({"repetition_penalty": 1.5}, 40),
    ({"repetition_penalty": 0.8}, 40),
    ({"presence_penalty": 1.0, "frequency_penalty": 0.7}, 40),
    ({"repetition_penalty": 1.3, "presence_penalty": -0.5, "frequency_penalty": 1.5}, 40),
    ({"logit_bias": {100: 3.0, 314: -2.0}}, 40),
    ({"min_tokens": 30, "repetition_penalty": 1.2}, 40),
]


def expected(raw, token, fields, prompt, output, eos):
    import numpy as np
    f32 = np.float32
    logit = f32(raw)
    if len(output) < fields.get("min_tokens", 0) and token in eos:
        logit = f32(-np.inf)
    logit = f32(logit + f32(fields.get("logit_bias", {}).get(token, 0.0)))
    r = f32(fields.get("repetition_penalty", 1.0))
    if token in prompt or token in output:
        logit = f32(logit / r) if logit > 0 else f32(logit * r)
    count = output.count(token)
    if count:
        logit = f32(logit - f32(fields.get("frequency_penalty", 0.0)) * f32(count))
        logit = f32(logit - f32(fields.get("presence_penalty", 0.0)))
    return float(logit)


def run(model, mode, prompt):
    from vllm import LLM, SamplingParams
    llm = LLM(model=model, dtype="float32", max_model_len=512, seed=0, logprobs_mode=mode,
              max_logprobs=20)
    runs = []
    for fields, max_tokens in CASES:
        params = SamplingParams(temperature=0.0, max_tokens=max_tokens, logprobs=20, **fields)
        out = llm.generate([{"prompt_token_ids": prompt}], params, use_tqdm=False)[0].outputs[0]
        runs.append((list(out.token_ids),
                     [{k: v.logprob for k, v in step.items()} for step in out.logprobs]))
    eos = {llm.get_tokenizer().eos_token_id}
    del llm
    return runs, eos


def main():
    model = sys.argv[1]
    from transformers import AutoTokenizer
    prompt = AutoTokenizer.from_pretrained(model).encode(
        "Once upon a time, there was a little girl named Lily. She", add_special_tokens=False)
    raw_runs, eos = run(model, "raw_logits", prompt)
    processed_runs, _ = run(model, "processed_logits", prompt)
    failed = False
    for (fields, _), (tokens, raw), (tokens2, processed) in zip(CASES, raw_runs, processed_runs):
        assert tokens == tokens2
        compared, worst = 0, 0.0
        for t, (raw_step, processed_step) in enumerate(zip(raw, processed)):
            for token, value in processed_step.items():
                if token not in raw_step:
                    continue
                want = expected(raw_step[token], token, fields, set(prompt), tokens[:t], eos)
                diff = 0.0 if want == value else (
                    math.inf if math.isinf(want) or math.isinf(value) else abs(want - value))
                compared += 1
                worst = max(worst, diff)
        failed |= worst > 1e-4
        print(json.dumps(fields), f"compared {compared} logits, max |diff| {worst:.3g}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
