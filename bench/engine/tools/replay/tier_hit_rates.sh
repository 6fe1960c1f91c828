#!/usr/bin/env bash
# Per-tier hit rates of the Mooncake conversation trace in `pagedkv replay` (512-token blocks, a
# 4,096-block LRU device pool): the tables of bench/RESULTS.md ("KV tiers") - tier
# configurations, the host tier's store threshold, 4 instances in serve mode with and without a
# shared remote tier - and a gnuplot plot of the hit rate against the host tier's capacity.
#   bash bench/engine/tools/replay/tier_hit_rates.sh [build dir] [trace] [out dir]
set -euo pipefail
build=${1:-build}
trace=${2:-../shared/data/traces/conversation_trace.jsonl.gz}
out=${3:-out/replay}
mkdir -p "$out"
# host remote tier-policy store-policy threshold -> "device host remote all infinite" (%)
run() {
  "$build/pagedkv" replay --trace "$trace" --block-size 512 --trace-block-size 512 \
    --capacity-blocks 4096 --host-capacity-blocks "$1" --remote-capacity-blocks "$2" \
    --tier-policy "$3" --host-store-policy "${4:-write-through}" \
    --host-store-threshold "${5:-0}" --json --no-progress |
    python3 -c 'import json,sys
j=json.load(sys.stdin); t=j.get("tiers",{})
print("%.2f %.2f %.2f %.2f %.2f"%(100*j["block_hit_rate"],100*t.get("host_block_hit_rate",0),
  100*t.get("remote_block_hit_rate",0),100*t.get("tiered_block_hit_rate",j["block_hit_rate"]),
  100*j["infinite_cache_block_hit_rate"]))'
}
echo "| configuration | device | host | remote | all tiers | infinite |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
for cfg in "0 0 device-only" "16384 0 device+host(16k)" "16384 65536 device+host(16k)+remote(64k)"; do
  set -- $cfg
  read -r d h r a i < <(run "$1" "$2" lru)
  echo "| $3 | $d% | $h% | $r% | $a% | $i% |"
done
echo
echo "| host store (16k LRU host tier, 64k remote) | threshold | device | host | remote | all tiers |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
for store in write-through write-back; do
  for k in 0 1 2; do
    for remote in 0 65536; do
      read -r d h r a _ < <(run 16384 "$remote" lru "$store" "$k")
      echo "| $store, remote $remote | $k | $d% | $h% | $r% | $a% |"
    done
  done
done
echo
# Serve mode, 4 instances: a 16k-block host tier each, with and without one shared remote tier.
serve() {  # router remote -> one table row
  "$build/pagedkv" replay --trace "$trace" --block-size 512 --trace-block-size 512 --mode serve \
    --instances 4 --router "$1" --capacity-blocks 4096 --host-capacity-blocks 16384 \
    --remote-capacity-blocks "$2" --json --no-progress |
    python3 -c 'import json,sys
j=json.load(sys.stdin); t=j["tiers"]
per=" / ".join("%.1f"%(100*(p["tiers"]["host_hit_rate"]+p["tiers"]["remote_hit_rate"]))
               for p in j["per_instance"])
print("| %s | %s | %.2f%% | %.2f%% / %.2f%% | %s | %.0f s | %.2f / %.2f / %.2f s | %.1f M |"%(
  sys.argv[1], sys.argv[2], 100*j["prefix_hit_rate"], 100*t["host_hit_rate"],
  100*t["remote_hit_rate"], per, t["load_seconds"], j["ttft_mean_s"], j["ttft_p50_s"],
  j["ttft_p99_s"], j["computed_tokens"]/1e6))' "$1" "$2"
}
echo "| router | shared remote blocks | prefix hit | of it host / remote | tier hits per instance (%) | load time | TTFT mean / p50 / p99 | computed |"
echo "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |"
for router in round-robin prefix-aware; do
  for remote in 0 65536; do serve "$router" "$remote"; done
done
echo
data="$out/tier_host_capacity.dat"
: > "$data"
for host in 0 1024 2048 4096 8192 16384 32768 65536 131072 262144; do
  read -r _ _ _ lru inf < <(run "$host" 0 lru)
  read -r _ _ _ arc _ < <(run "$host" 0 arc)
  read -r _ _ _ lru1 _ < <(run "$host" 0 lru write-through 1)
  echo "$host $lru $arc $inf $lru1" >> "$data"
done
cat "$data"
plot="set xlabel 'host tier capacity (512-token blocks)'; set ylabel 'block hit rate (%)';
set logscale x 2; set key bottom right; set yrange [0:40];
plot '$data' using (\$1+512):2 with linespoints title 'device 4096 + host (LRU)',
     '' using (\$1+512):3 with linespoints title 'device 4096 + host (ARC)',
     '' using (\$1+512):5 with linespoints title 'device 4096 + host (LRU, threshold 1)',
     '' using (\$1+512):4 with lines dt 2 title 'infinite cache'"
gnuplot -e "set terminal pngcairo size 900,500; set output '$out/tier_host_capacity.png'; $plot" \
  2>/dev/null || gnuplot -e "set terminal svg; set output '$out/tier_host_capacity.svg'; $plot"
gnuplot -e "set terminal dumb 90 28; $plot"
