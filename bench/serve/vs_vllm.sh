#!/usr/bin/env bash
# `pagedkv serve` beside vLLM's CPU build (and llama.cpp's `llama-server` when LLAMA_SERVER names
# one) on one machine, one model, one load client: vLLM's own `vllm bench serve`, prefix-repetition
# workload (4 shared 512-token prefixes, 64-token suffixes, 64 output tokens, greedy, EOS ignored),
# at each concurrency in CONCURRENCY. One fresh server per (server, concurrency); the table gives
# output tokens/s, TTFT p50 / p99, TPOT p50 and the server's resident memory after the run.
#
#   VENV=$(bash bench/serve/vllm_cpu_env.sh)
#   $VENV/bin/python bench/serve/gguf_to_hf.py $GGUF /tmp/smollm2-hf
#   VENV=$VENV GGUF=$GGUF HF_DIR=/tmp/smollm2-hf bash bench/serve/vs_vllm.sh [BUILD_DIR] [OUT_DIR]
# Environment: CONCURRENCY (default "1 8 32"), PROMPTS_PER_CONCURRENCY (default 4 x C, at least 8),
# SERVERS (default "pagedkv vllm", plus "llama" with LLAMA_SERVER), PAGEDKV_FLAGS. Take numbers on
# a quiet machine: every server uses both cores.
set -euo pipefail

build=${1:-build}
out=${2:-out/vs_vllm}
: "${VENV:?set VENV to bench/serve/vllm_cpu_env.sh's environment}"
: "${GGUF:?set GGUF to the model file}" "${HF_DIR:?set HF_DIR to gguf_to_hf.py's directory}"
concurrency=${CONCURRENCY:-1 8 32}
servers=${SERVERS:-pagedkv vllm${LLAMA_SERVER:+ llama}}
port=18090
mkdir -p "$out"

start_server() {  # start_server NAME: starts it in the background, sets $pid
  case $1 in
    pagedkv)
      # shellcheck disable=SC2086
      "$build/pagedkv" serve --model "$GGUF" --port $port --served-model-name model \
        ${PAGEDKV_FLAGS:-} > "$out/$1.log" 2>&1 &
      ;;
    vllm)
      VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-4} "$VENV/bin/vllm" serve "$HF_DIR" \
        --port $port --served-model-name model --dtype bfloat16 --max-model-len 2048 \
        > "$out/$1.log" 2>&1 &
      ;;
    llama)
      "$LLAMA_SERVER" -m "$GGUF" --port $port --alias model --parallel 32 -c 36864 -t 2 \
        > "$out/$1.log" 2>&1 &
      ;;
  esac
  pid=$!
}

wait_ready() {  # wait_ready SECONDS: until /v1/models answers (the start-up time is printed)
  local start=$SECONDS
  until curl -sf "http://127.0.0.1:$port/v1/models" > /dev/null; do
    kill -0 "$pid" 2> /dev/null || { echo "server exited; see its log" >&2; return 1; }
    [ $((SECONDS - start)) -lt "$1" ] || { echo "not ready in $1 s" >&2; return 1; }
    sleep 0.5
  done
  echo $((SECONDS - start))
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| server | concurrency | output tok/s | TTFT p50 / p99 (ms) | TPOT p50 (ms) | RSS (MB) | ready in (s) |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
for server in $servers; do
  for c in $concurrency; do
    start_server "$server"
    ready=$(wait_ready 600)
    prompts=${PROMPTS_PER_CONCURRENCY:-$((c * 4 > 8 ? c * 4 : 8))}
    result="$out/$server-c$c.json"
    "$VENV/bin/vllm" bench serve --backend openai --base-url "http://127.0.0.1:$port" \
      --model model --tokenizer "$HF_DIR" --dataset-name prefix_repetition \
      --prefix-repetition-prefix-len 512 --prefix-repetition-suffix-len 64 \
      --prefix-repetition-num-prefixes 4 --prefix-repetition-output-len 64 \
      --num-prompts "$prompts" --max-concurrency "$c" --temperature 0 --ignore-eos --seed 1 \
      --save-result --result-filename "$result" > "$out/$server-c$c.bench.log" 2>&1
    rss=$(awk '/VmRSS/ {print int($2 / 1024)}' "/proc/$pid/status")
    kill "$pid"
    wait "$pid" 2> /dev/null || true
    "$VENV/bin/python" - "$result" "$server" "$c" "$rss" "$ready" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"| {sys.argv[2]} | {sys.argv[3]} | {r['output_throughput']:.1f} | "
      f"{r['median_ttft_ms']:.0f} / {r['p99_ttft_ms']:.0f} | {r['median_tpot_ms']:.0f} | "
      f"{sys.argv[4]} | {sys.argv[5]} |")
EOF
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
