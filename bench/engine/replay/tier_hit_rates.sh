#!/usr/bin/env bash
# Per-tier hit rates of the Mooncake conversation trace in `pagedkv replay --mode cache` (512-token
# blocks, a 4,096-block LRU device pool): the table of bench/RESULTS.md ("KV tiers") and a
# gnuplot plot of the hit rate against the host tier's capacity (LRU and ARC tiers).
#   bash bench/engine/replay/tier_hit_rates.sh [build dir] [trace] [out dir]
set -euo pipefail
build=${1:-build}
trace=${2:-../shared/data/traces/conversation_trace.jsonl.gz}
out=${3:-out/replay}
mkdir -p "$out"
run() {  # host remote policy -> "device host remote all infinite" block hit rates (%)
  "$build/pagedkv" replay --trace "$trace" --block-size 512 --trace-block-size 512 \
    --capacity-blocks 4096 --host-capacity-blocks "$1" --remote-capacity-blocks "$2" \
    --tier-policy "$3" --json |
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
data="$out/tier_host_capacity.dat"
: > "$data"
for host in 0 1024 2048 4096 8192 16384 32768 65536 131072 262144; do
  read -r _ _ _ lru inf < <(run "$host" 0 lru)
  read -r _ _ _ arc _ < <(run "$host" 0 arc)
  echo "$host $lru $arc $inf" >> "$data"
done
cat "$data"
plot="set xlabel 'host tier capacity (512-token blocks)'; set ylabel 'block hit rate (%)';
set logscale x 2; set key bottom right; set yrange [0:40];
plot '$data' using (\$1+512):2 with linespoints title 'device 4096 + host (LRU)',
     '' using (\$1+512):3 with linespoints title 'device 4096 + host (ARC)',
     '' using (\$1+512):4 with lines dt 2 title 'infinite cache'"
gnuplot -e "set terminal pngcairo size 900,500; set output '$out/tier_host_capacity.png'; $plot" \
  2>/dev/null || gnuplot -e "set terminal svg; set output '$out/tier_host_capacity.svg'; $plot"
gnuplot -e "set terminal dumb 90 28; $plot"
