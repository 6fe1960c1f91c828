#!/usr/bin/env bash
# 4 pagedkv serve instances of SmolLM2 behind vllm-router (scripts/cluster.py), one multi-turn
# workload (load_client.py's conversation generator) per router policy: round_robin, cache_aware,
# kv_aware, without and with the shared Redis tier, and cache_aware / kv_aware with two router
# replicas behind a round-robin balancer. Then the same requests (rebuilt by
# to_mooncake.py from the kv_aware run) through `pagedkv replay --instances 4`.
# Usage: bash bench/serve/cluster_bench.sh [OUT_DIR]   (default out/cluster_bench)
# Env: SESSIONS (10), TURNS (4), POLICIES ("round_robin cache_aware kv_aware"),
#      SETUPS ("none redis 2routers"), POLICIES_2ROUTERS ("cache_aware kv_aware"), INSTANCES (4),
#      ROUTER_LOG_LEVEL (info; debug logs kv_aware's "KV prefix decision" per request).
#      Each instance gets --threads 1.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-out/cluster_bench}"
mkdir -p "$out"
model="$(bash scripts/fetch_models.sh)"
n="${INSTANCES:-4}"
workload=(--workload conversation --sessions "${SESSIONS:-10}" --turns "${TURNS:-4}"
          --system-tokens 200 --user-tokens 32 --output-tokens 16 --rate 1 --concurrency 4
          --vocab 49152)
# none: no shared tier, one router; redis: the shared Redis tier, one router; 2routers: no tier,
# two router replicas behind a round-robin TCP balancer (an HA router pair).
for setup in ${SETUPS:-none redis 2routers}; do
  policies="${POLICIES:-round_robin cache_aware kv_aware}"
  flags=(--no-redis)
  case "$setup" in
    redis) flags=() ;;
    2routers) flags=(--no-redis --routers 2); policies="${POLICIES_2ROUTERS:-cache_aware kv_aware}" ;;
  esac
  for policy in $policies; do
    run="$out/${policy}_${setup}"
    echo "== $policy, $setup; load: $(uptime)"
    /usr/bin/python3 scripts/cluster.py -n "$n" --model "$model" --policy "$policy" \
        "${flags[@]}" --threads 1 --log-dir "$run.logs" --metrics-json "$run.metrics.json" \
        --router-log-level "${ROUTER_LOG_LEVEL:-info}" \
        --run "/usr/bin/python3 bench/serve/load_client.py --base-url \$ROUTER_URL \
               ${workload[*]} --json $run.json" | grep -v -E '^(instance [0-9] http|replica)'
  done
done
echo "== after the runs; load: $(uptime)"
trace="$out/conversation.jsonl"
src="$out/kv_aware_none.json"
if [ ! -f "$src" ]; then  # another run of this directory: any load_client JSON
  src="$(find "$out" -maxdepth 1 -name '*_*.json' ! -name '*.metrics.json' ! -name 'replay_*' | sort | head -n 1)"
fi
/usr/bin/python3 bench/serve/to_mooncake.py "$src" "$trace"
for router in round-robin prefix-aware oracle; do
  build/pagedkv replay --trace "$trace" --trace-block-size 16 --block-size 16 --mode serve \
      --instances "$n" --router "$router" --json --no-progress > "$out/replay_$router.json"
done
/usr/bin/python3 - "$out" <<'EOF'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
print("| run | cached-token share | TTFT p50 (ms) | TTFT p99 (ms) | e2e p99 (ms) | requests per instance |")
print("| --- | ---: | ---: | ---: | ---: | --- |")
for run in sorted(out.glob("*_*.json")):
    if run.name.endswith(".metrics.json") or run.name.startswith("replay_"):
        continue
    s = json.loads(run.read_text())["summary"]
    m = json.loads(run.with_suffix(".metrics.json").read_text())
    per = "/".join(f"{x['pagedkv_requests_received_total']:.0f}" for x in m)
    print(f"| {run.stem} | {s['cached_share']:.1%} ({s['cached_tokens']} of {s['prompt_tokens']}) "
          f"| {s['ttft_s']['p50'] * 1e3:.0f} | {s['ttft_s']['p99'] * 1e3:.0f} "
          f"| {s['e2e_s']['p99'] * 1e3:.0f} | {per} |")
for run in sorted(out.glob("replay_*.json")):
    r = json.loads(run.read_text())
    per = "/".join(str(x["requests"]) for x in r["per_instance"])
    print(f"| {run.stem} ({r['gpu']}, {r['model']}, simulated) | {r['prefix_hit_rate']:.1%} "
          f"({r['prefix_hit_tokens']} of {r['prompt_tokens']}) | {r['ttft_p50_s'] * 1e3:.1f} "
          f"| {r['ttft_p99_s'] * 1e3:.1f} | {r['e2e_p99_s'] * 1e3:.1f} | {per} |")
EOF
