#!/usr/bin/env bash
# 4 pagedkv serve instances of SmolLM2 behind vllm-router (scripts/cluster.py), multi-turn
# workloads (load_client.py's conversation generator) through each router policy, then the same
# requests (rebuilt by to_mooncake.py) through `pagedkv replay --instances 4`.
#
# Workloads (WORKLOADS, default "private shared80 shared160 shared320"):
#   private: every session its own 200-token system part, 4 turns, pools that hold everything;
#            setups none (one router, no tier), redis (the shared Redis tier), Krouters (K
#            router replicas behind a round-robin balancer, no tier; 2routers and 4routers).
#   sharedP: a 64-token system part every session shares + 64 of its own, 10 turns, and pools of
#            P blocks of 16 tokens (80 blocks hold two sessions at their longest): where KV
#            memory binds; setups SHARED_SETUPS (default none; redis adds the Redis tier), and
#            cache_aware also with its balance threshold scaled to this load
#            (--balance-abs-threshold 2, no tier).
# Usage: bash bench/serve/cluster_bench.sh [OUT_DIR]   (default out/cluster_bench)
# Env: WORKLOADS, SESSIONS (16), POLICIES ("round_robin cache_aware kv_aware"),
#      SETUPS ("none redis 2routers 4routers", private), SHARED_SETUPS ("none", sharedP),
#      POLICIES_2ROUTERS (POLICIES; the policies of every Krouters setup), INSTANCES (4),
#      ROUTER_LOG_LEVEL (info; debug logs kv_aware's "KV prefix decision" per request).
#      Each instance gets --threads 1. Runs are named WORKLOAD_POLICY_SETUP.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-out/cluster_bench}"
mkdir -p "$out"
model="$(bash scripts/fetch_models.sh)"
n="${INSTANCES:-4}"
policies="${POLICIES:-round_robin cache_aware kv_aware}"
common=(--workload conversation --sessions "${SESSIONS:-16}" --user-tokens 32 --output-tokens 16
        --rate 1 --concurrency 4 --vocab 49152)
private=("${common[@]}" --turns 4 --system-tokens 200)
shared=("${common[@]}" --turns 10 --shared-system-tokens 64 --system-tokens 64)

# run NAME WORKLOAD_ARRAY_NAME POLICY [cluster.py flags...] [-- serve flags...]
run() {
  local name="$1" policy="$3"
  local -n wl="$2"
  shift 3
  echo "== $name; load: $(uptime)"
  /usr/bin/python3 scripts/cluster.py -n "$n" --model "$model" --policy "$policy" --threads 1 \
      --log-dir "$out/$name.logs" --metrics-json "$out/$name.metrics.json" \
      --router-log-level "${ROUTER_LOG_LEVEL:-info}" \
      --run "/usr/bin/python3 bench/serve/load_client.py --base-url \$ROUTER_URL \
             ${wl[*]} --json $out/$name.json" "$@" | grep -v -E '^(instance [0-9] http|replica)'
}

# replay WORKLOAD [replay flags...]: the requests of the workload's kv_aware run (one router, no
# tier; else any run of it: the prompts are the same, the send times differ) through the replay's
# routers.
replay() {
  local workload="$1" src="$out/$1_kv_aware_none.json"
  shift
  if [ ! -f "$src" ]; then
    src="$(find "$out" -maxdepth 1 -name "${workload}_*_*.json" ! -name '*.metrics.json' \
           ! -name '*_replay_*' | sort | head -n 1)"
  fi
  /usr/bin/python3 bench/serve/to_mooncake.py "$src" "$out/$workload.jsonl"
  for router in round-robin prefix-aware oracle; do
    build/pagedkv replay --trace "$out/$workload.jsonl" --trace-block-size 16 --block-size 16 \
        --mode serve --instances "$n" --router "$router" --json --no-progress "$@" \
        > "$out/${workload}_replay_$router.json"
  done
}

for workload in ${WORKLOADS:-private shared80 shared160 shared320}; do
  case "$workload" in
    private)
      for setup in ${SETUPS:-none redis 2routers 4routers}; do
        flags=(--no-redis)
        ps="$policies"
        case "$setup" in
          redis) flags=() ;;
          *routers) flags=(--no-redis --routers "${setup%routers}"); ps="${POLICIES_2ROUTERS:-$policies}" ;;
        esac
        for policy in $ps; do run "private_${policy}_$setup" private "$policy" "${flags[@]}"; done
      done
      replay private
      ;;
    shared*)  # sharedP: pools of P blocks
      pool="${workload#shared}"
      case "$pool" in ''|*[!0-9]*) echo "bad workload $workload (sharedP, P blocks)" >&2; exit 2 ;; esac
      for setup in ${SHARED_SETUPS:-none}; do
        flags=(--no-redis)
        [ "$setup" = redis ] && flags=()
        for policy in $policies; do
          run "${workload}_${policy}_$setup" shared "$policy" "${flags[@]}" -- --num-kv-blocks "$pool"
        done
      done
      run "${workload}_cache_aware-balance2_none" shared cache_aware --no-redis \
          --router-arg=--balance-abs-threshold --router-arg=2 -- --num-kv-blocks "$pool"
      replay "$workload" --capacity-blocks "$pool"
      ;;
    *) echo "unknown workload $workload (private or sharedP)" >&2; exit 2 ;;
  esac
done
echo "== after the runs; load: $(uptime)"
/usr/bin/python3 - "$out" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
print("| run | cached-token share | TTFT p50 (ms) | TTFT p99 (ms) | e2e p99 (ms) | requests per instance |")
print("| --- | ---: | ---: | ---: | ---: | --- |")
for run in sorted(out.glob("*_*_*.json")):
    if run.name.endswith(".metrics.json") or "_replay_" in run.name:
        continue
    s = json.loads(run.read_text())["summary"]
    m = json.loads(run.with_suffix(".metrics.json").read_text())
    per = "/".join(f"{x['pagedkv_requests_received_total']:.0f}" for x in m)
    print(f"| {run.stem} | {s['cached_share']:.1%} ({s['cached_tokens']} of {s['prompt_tokens']}) "
          f"| {s['ttft_s']['p50'] * 1e3:.0f} | {s['ttft_s']['p99'] * 1e3:.0f} "
          f"| {s['e2e_s']['p99'] * 1e3:.0f} | {per} |")
for run in sorted(out.glob("*_replay_*.json")):
    r = json.loads(run.read_text())
    per = "/".join(str(x["requests"]) for x in r["per_instance"])
    print(f"| {run.stem} ({r['gpu']}, {r['model']}, simulated) | {r['prefix_hit_rate']:.1%} "
          f"({r['prefix_hit_tokens']} of {r['prompt_tokens']}) | {r['ttft_p50_s'] * 1e3:.1f} "
          f"| {r['ttft_p99_s'] * 1e3:.1f} | {r['e2e_p99_s'] * 1e3:.1f} | {per} |")
PY
