#!/usr/bin/env bash
# Prints issue 29's table: pagedkv replay (old and default block model) beside vLLM's real
# KVCacheManager (fed the old model, and as it serves) and SGLang's real RadixCache (as it
# serves), LRU, one request at a time in file order.
# Usage: bench/replay/real_peers/compare.sh [build_dir] [trace] [block_size] [capacities...]
#   default: build ../shared/data/traces/conversation_trace.jsonl.gz 512 4096 16384
# TRACE_BLOCK_SIZE (default 512): tokens per hash id of the trace.
# Needs the venv of install_peers.sh (PEERS_VENV, default /tmp/pagedkv-peers). vLLM's manager
# runs at about 3-20 k blocks/s here, so the default run takes 3-4 minutes.
set -euo pipefail
cd "$(dirname "$0")/../../.."
build="${1:-build}"
trace="${2:-../shared/data/traces/conversation_trace.jsonl.gz}"
bs="${3:-512}"
shift $(($# < 3 ? $# : 3))
caps=("$@")
[ ${#caps[@]} -eq 0 ] && caps=(4096 16384)
tbs="${TRACE_BLOCK_SIZE:-512}"
py="${PEERS_VENV:-/tmp/pagedkv-peers}/bin/python"
out="$(mktemp -d)"
for c in "${caps[@]}"; do
  "$build/pagedkv" replay --trace "$trace" --block-size "$bs" --trace-block-size "$tbs" \
    --capacity-blocks "$c" --policies lru --json >"$out/pagedkv_default_$c.json"
  "$build/pagedkv" replay --trace "$trace" --block-size "$bs" --trace-block-size "$tbs" \
    --capacity-blocks "$c" --policies lru --json --cache-partial-tail >"$out/pagedkv_partial_$c.json"
done
"$py" bench/replay/real_peers/vllm_replay.py --trace "$trace" --block-size "$bs" --trace-block-size "$tbs" \
  --capacity "${caps[@]}" --json 2>/dev/null >"$out/vllm.jsonl"
"$py" bench/replay/real_peers/sglang_replay.py --trace "$trace" --page-size "$bs" --trace-block-size "$tbs" \
  --capacity "${caps[@]}" --json 2>/dev/null >"$out/sglang.jsonl" || echo "sglang run failed" >&2
python3 - "$out" "${caps[@]}" <<'PY'
import json, os, sys
out, caps = sys.argv[1], [int(c) for c in sys.argv[2:]]
def rows(name):
    p = os.path.join(out, name)
    return [json.loads(l) for l in open(p)] if os.path.exists(p) else []
vllm = {(r["capacity_blocks"], r["model"]): r for r in rows("vllm.jsonl")}
sgl = {r["capacity_blocks"]: r for r in rows("sglang.jsonl")}
def cell(r):
    return "-" if r is None else f"{r['hit_blocks']:,}, {r['token_hit_rate']:.4f}"
print("| capacity | pagedkv --cache-partial-tail | vLLM fed that model | pagedkv default "
      "| vLLM as it serves | SGLang as it serves |")
print("|---|---:|---:|---:|---:|---:|")
for c in caps:
    old = json.load(open(os.path.join(out, f"pagedkv_partial_{c}.json")))
    new = json.load(open(os.path.join(out, f"pagedkv_default_{c}.json")))
    print(f"| {c:,} blocks | {cell(old)} | {cell(vllm.get((c, 'pagedkv')))} | {cell(new)} "
          f"| {cell(vllm.get((c, 'serve')))} | {cell(sgl.get(c))} |")
speeds = [f"vLLM {r['model']} {r['blocks_per_second']:,.0f}" for r in vllm.values()]
speeds += [f"SGLang {r['blocks_per_second']:,.0f}" for r in sgl.values()]
print("blocks/s: " + "; ".join(speeds))
PY
