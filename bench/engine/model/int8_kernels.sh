#!/usr/bin/env bash
# SmolLM2-135M-Instruct Q4_1 through `pagedkv generate`, each CPU path side by side in one run:
# fp32 activations, then int8 activations with each int8 kernel this CPU runs (--int8-kernel),
# at 1 and 2 threads. Rows: prefill of a ~460-token prompt (tokens/s computed), 32 sequences x 64
# new tokens (generated tokens/s), one sequence x 128 (generated tokens/s). Every run is greedy;
# the kernels give the same tokens (tests/engine/model/formats/gguf_smollm2_test.cc).
#
#   bash bench/engine/model/int8_kernels.sh [BUILD_DIR] [MODEL]
# Take numbers on a quiet machine; the script prints the load average before and after.
set -euo pipefail

build=${1:-build}
model=${2:-$HOME/.cache/pagedkv/models/SmolLM2-135M-Instruct.Q4_1.gguf}
pagedkv="$build/pagedkv"
[ -x "$pagedkv" ] || { echo "int8_kernels.sh: no $pagedkv; build first" >&2; exit 1; }
[ -f "$model" ] || { echo "int8_kernels.sh: no $model; run scripts/fetch_models.sh" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A fixed ~460-token prompt: the same sentences every run.
for i in $(seq 1 23); do
  printf 'On day %d the small village by the river woke early, and the baker opened his door. ' "$i"
done > "$work/prompt.txt"
batch_prompts=()
for i in $(seq 1 32); do batch_prompts+=(--prompt "Story $i: once upon a time there was a little"); done

# The "tokens/s computed" or "tokens/s generated" figure of a --stats run.
rate() {  # rate computed|generated ARGS...
  local which=$1
  shift
  "$pagedkv" generate --model "$model" --stats "$@" 2>/dev/null |
    sed -n "s/.* \([0-9.]*\) tokens\/s ${which}.*/\1/p" | tail -1
}

paths=("f32:--activations f32")
for kernel in avx2 avx512vnni; do
  if "$pagedkv" generate --model "$model" --prompt x -n 1 --int8-kernel "$kernel" \
    > /dev/null 2>&1; then
    paths+=("int8 $kernel:--int8-kernel $kernel")
  fi
done

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| path | threads | prefill tok/s | 32 x 64 tok/s | 1 x 128 tok/s |"
echo "| --- | ---: | ---: | ---: | ---: |"
for entry in "${paths[@]}"; do
  name=${entry%%:*}
  read -r -a flags <<< "${entry#*:}"
  for t in 1 2; do
    prefill=$(rate computed --prompt-file "$work/prompt.txt" -n 1 --threads "$t" "${flags[@]}")
    batch=$(rate generated "${batch_prompts[@]}" -n 64 --threads "$t" "${flags[@]}")
    single=$(rate generated --prompt "Once upon a time" -n 128 --threads "$t" "${flags[@]}")
    echo "| $name | $t | $prefill | $batch | $single |"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
