#!/usr/bin/env bash
# Eviction policies on both Mooncake traces (issue #18): every built-in policy and Belady, at four
# capacities of the same token budget in 512-token and 16-token blocks, through
# `pagedkv replay --mode cache --sweep`. Prints one markdown table per trace (block hit rate, %)
# and writes a gnuplot plot per trace (hit rate against capacity, one line per policy).
#   nice -n 10 bash bench/engine/tools/replay/eviction_sweep.sh [build dir] [traces dir] [out dir]
set -euo pipefail
build=${1:-build}
traces=${2:-../shared/data/traces}
out=${3:-out/replay/eviction}
policies=lru,lfu,fifo,arc,s3fifo,wtinylfu,chain,belady
caps512=(1024 4096 16384 65536)  # 0.5, 2, 8 and 32 M tokens
mkdir -p "$out"
for trace in conversation synthetic; do
  for bs in 512 16; do
    sweep=$(for c in "${caps512[@]}"; do echo -n "$((c * 512 / bs)),"; done)
    dir="$out/${trace}_bs$bs"
    "$build/pagedkv" replay --trace "$traces/${trace}_trace.jsonl.gz" --block-size "$bs" \
      --trace-block-size 512 --policies "$policies" --sweep "${sweep%,}" --out-dir "$dir" \
      --no-progress > "$dir.log"
  done
  # One row per (block size, capacity): policy columns in --policies order, then the ceiling.
  data="$out/$trace.dat"
  python3 - "$out" "$trace" "$policies" > "$data" <<'PY'
import csv, sys
out, trace, policies = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
for bs in (512, 16):
    rows = list(csv.DictReader(open(f"{out}/{trace}_bs{bs}/{trace}_trace_sweep.csv")))
    for cap in sorted({int(r["capacity_blocks"]) for r in rows}):
        at = {r["policy"]: r for r in rows if int(r["capacity_blocks"]) == cap}
        tokens = cap * bs
        vals = [100 * float(at[p]["block_hit_rate"]) for p in policies]
        inf = 100 * float(at[policies[0]]["infinite_cache_block_hit_rate"])
        print(bs, cap, tokens, " ".join(f"{v:.2f}" for v in vals), f"{inf:.2f}")
PY
  echo "### $trace trace: block hit rate (%)"
  echo
  echo "| block size | capacity (blocks) | $(echo "$policies" | sed 's/,/ | /g') | infinite |"
  echo "| ---: | ---: |$(echo "$policies" | sed 's/[^,]*/ ---: |/g; s/,//g') ---: |"
  awk '{printf "| %s | %s |", $1, $2; for (i = 4; i <= NF; i++) printf " %s |", $i; print ""}' "$data"
  echo
  n=$(echo "$policies" | tr ',' '\n' | wc -l)
  plot="set xlabel 'capacity (M tokens)'; set ylabel 'block hit rate (%)'; set logscale x 2;
set key outside right; set title '$trace trace: solid 512-token blocks, dashed 16-token';
plot for [i=1:$n] '$data' using (\$1==512 ? \$3/1048576.0 : 1/0):(column(3+i)) with linespoints
       lc i dt 1 title word('$(echo "$policies" | tr ',' ' ')', i),
     for [i=1:$n] '$data' using (\$1==16 ? \$3/1048576.0 : 1/0):(column(3+i)) with linespoints
       lc i dt 2 notitle,
     '$data' using (\$1==512 ? \$3/1048576.0 : 1/0):(column(4+$n)) with lines lc black dt 3
       title 'infinite'"
  gnuplot -e "set terminal pngcairo size 1000,550; set output '$out/${trace}_eviction.png'; $plot" \
    2>/dev/null || gnuplot -e "set terminal svg; set output '$out/${trace}_eviction.svg'; $plot"
  # The text plot (for markdown): 512-token blocks, the policies the text discusses.
  col() { echo $((3 + $(echo "$policies" | tr ',' '\n' | grep -nx "$1" | cut -d: -f1))); }
  text="set xlabel 'capacity (M tokens, 512-token blocks)'; set ylabel 'block hit rate (%)';
set logscale x 2; set key bottom right; set yrange [0:*];"
  text+="plot"
  for p in lru arc s3fifo chain belady; do
    text+=" '$data' using (\$1==512 ? \$3/1048576.0 : 1/0):$(col $p) with linespoints title '$p',"
  done
  text+=" '$data' using (\$1==512 ? \$3/1048576.0 : 1/0):(column(4+$n)) with lines title 'infinite'"
  gnuplot -e "set terminal dumb 100 30; $text" > "$out/${trace}_eviction.txt"
done
