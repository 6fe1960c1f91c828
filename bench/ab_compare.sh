#!/bin/bash
# Two builds of pagedkv side by side (issue 40's check that a refactor changed no figure and no
# speed): the replay figures (cache mode, --hybrid-kv cache and serve modes) and SmolLM2's greedy
# ids must be identical; the cache and replay benchmarks run interleaved on one core, two rounds.
# Usage (from the repo root, on a quiet machine):
#   bash bench/ab_compare.sh BEFORE_BUILD_DIR AFTER_BUILD_DIR [OUT_DIR]
# The builds need the targets pagedkv, kv_cache_manager_benchmark, block_pool_benchmark,
# replay_benchmark and kv_cache_groups_benchmark (named hybrid_kv_cache_manager_benchmark before issue 40);
# SmolLM2 is the GGUF the tests fetch (~/.cache/pagedkv/models/SmolLM2-135M-Instruct.Q4_1.gguf).
set -u
B=${1:?before build dir}; A=${2:?after build dir}
OUT=${3:-out/ab}; mkdir -p "$OUT"
T=../shared/data/traces/conversation_trace.jsonl.gz
M=${SMOLLM2_GGUF:-$HOME/.cache/pagedkv/models/SmolLM2-135M-Instruct.Q4_1.gguf}
date -u; uptime
# identical figures: cache replay, hybrid replay, serve replay, SmolLM2 greedy ids
for side in before after; do
  D=$B; [ $side = after ] && D=$A
  $D/pagedkv replay --trace $T --block-size 16 --capacity-blocks 262144 --policies lru --json > "$OUT"/replay_$side.json 2>&1
  $D/pagedkv replay --trace $T --block-size 16 --capacity-blocks 100000 --model gpt-oss-20b --hybrid-kv > "$OUT"/hybrid_$side.txt 2>&1
  $D/pagedkv replay --trace $T --mode serve --gpu H100 --model gpt-oss-20b --hybrid-kv --block-size 16 --json > "$OUT"/hybrid_serve_$side.json 2>&1
  $D/pagedkv generate --model $M --prompt "The capital of France is" -n 48 --print-ids > "$OUT"/smol_$side.txt 2>&1
  $D/pagedkv generate --model $M --prompt "Once upon a time" -n 48 --print-ids --weights f32 > "$OUT"/smol_f32_$side.txt 2>&1
done
# hybrid serve: every field both JSON reports have (the table's form changed at 994b1fc), wall
# times aside
python3 - "$OUT" <<'PY'
import json, sys
def flat(d, p=""):
    out = {}
    for k, v in d.items():
        out.update(flat(v, p + k + ".") if isinstance(v, dict) else {p + k: v})
    return out
b, a = (flat(json.load(open(f"{sys.argv[1]}/hybrid_serve_{s}.json"))) for s in ("before", "after"))
diff = [k for k in b if k in a and b[k] != a[k] and "wall" not in k]
print("hybrid_serve: identical" if not diff else f"hybrid_serve: DIFFERS ({', '.join(diff)})")
PY
for f in replay hybrid smol smol_f32; do
  ext=txt; [ $f = replay ] && ext=json
  if diff <(grep -v -i "seconds\|wall\|elapsed\|tok/s\|_per_s\|time\|CPU s" "$OUT"/${f}_before.$ext) <(grep -v -i "seconds\|wall\|elapsed\|tok/s\|_per_s\|time\|CPU s" "$OUT"/${f}_after.$ext) > "$OUT"/${f}.diff; then echo "$f: identical"; else echo "$f: DIFFERS ($(wc -l < "$OUT"/${f}.diff) lines)"; fi
done
# speed, interleaved, one core
for round in 1 2; do
  for side in before after; do
    D=$B; [ $side = after ] && D=$A
    echo "== round $round $side"
    taskset -c 1 $D/bench/cache/kv_cache_manager_benchmark --benchmark_filter='PrefixLookup|ManagerAllocateFree' --benchmark_repetitions=5 --benchmark_report_aggregates_only=true 2>/dev/null | grep -E "median"
    taskset -c 1 $D/bench/cache/block_pool_benchmark --benchmark_filter='BM_ReplayCacheMode/policy:0' --benchmark_min_time=0.5 --benchmark_repetitions=5 --benchmark_report_aggregates_only=true 2>/dev/null | grep -E "median"
    GB=$D/bench/cache/kv_cache_groups_benchmark; [ -x $GB ] || GB=$D/bench/cache/hybrid_kv_cache_manager_benchmark
    taskset -c 1 $GB --benchmark_min_time=0.2 2>/dev/null | grep -E "^BM"
    RB=$D/bench/engine/replay/replay_benchmark; [ -x $RB ] || RB=$D/bench/engine/tools/replay/replay_benchmark
    taskset -c 1 $RB --benchmark_filter='CacheReplay/lru' --benchmark_repetitions=3 --benchmark_report_aggregates_only=true 2>/dev/null | grep -E "median"
    /usr/bin/time -f "replay wall %e s, max RSS %M KB" $D/pagedkv replay --trace $T --block-size 16 --capacity-blocks 262144 --policies lru --json > /dev/null 2> "$OUT"/time_${side}_$round.txt; cat "$OUT"/time_${side}_$round.txt | tail -1
  done
done
date -u; uptime
