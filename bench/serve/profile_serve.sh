#!/usr/bin/env bash
# Where a loaded `pagedkv serve` spends its CPU (issue 39): one server, the shared-prefix load of
# bench/serve/load_client.py at concurrency C, `perf record` of the server for SECONDS once the
# load runs, and its samples grouped by what they do (attention, int8 / fp32 matmuls, the other
# per-token ops, the thread pool, the scheduler and KV cache manager, the HTTP server, the kernel,
# the rest). Prints one row per group (percent of the server's samples) and the client's summary.
#
#   bash bench/serve/profile_serve.sh [BUILD_DIR] [OUT_DIR]   # build, out/profile_serve
# Environment: GGUF (default SmolLM2-135M-Instruct Q4_1 from scripts/fetch_models.sh),
# CONCURRENCY (32), REQUESTS (160), PROFILE_SECONDS (25), PAGEDKV_FLAGS (e.g. "--kv-cache-dtype
# bf16").
# Needs perf (linux-perf); runs on /usr/bin/python3 with nothing installed. Proportions hold on a
# busy machine; times do not.
set -euo pipefail

build=${1:-build}
out=${2:-out/profile_serve}
gguf=${GGUF:-$HOME/.cache/pagedkv/models/SmolLM2-135M-Instruct.Q4_1.gguf}
concurrency=${CONCURRENCY:-32}
requests=${REQUESTS:-160}
seconds=${PROFILE_SECONDS:-25}
here=$(dirname "$0")
command -v perf > /dev/null || { echo "profile_serve.sh: needs perf" >&2; exit 2; }
[ -x "$build/pagedkv" ] || { echo "profile_serve.sh: no $build/pagedkv" >&2; exit 2; }
mkdir -p "$out"

# shellcheck disable=SC2086
"$build/pagedkv" serve --model "$gguf" --port 0 ${PAGEDKV_FLAGS:-} > "$out/pagedkv.log" 2>&1 &
server=$!
trap 'kill $server 2> /dev/null || true' EXIT
port=""
for _ in $(seq 600); do  # the banner names the port at once; "ready" once the model is loaded
  port=${port:-$(sed -n 's|.*listening on http://[^:]*:\([0-9]*\).*|\1|p' "$out/pagedkv.log")}
  [ -n "$port" ] && grep -q "ready:" "$out/pagedkv.log" && break
  sleep 0.2
done
grep -q "ready:" "$out/pagedkv.log" ||
  { echo "profile_serve.sh: the server did not start" >&2; cat "$out/pagedkv.log" >&2; exit 1; }

/usr/bin/python3 "$here/load_client.py" --base-url "http://127.0.0.1:$port" \
  --workload shared-prefix --num-requests "$requests" --system-tokens 512 --user-tokens 64 \
  --output-tokens 64 --concurrency "$concurrency" > "$out/client.txt" 2>&1 &
client=$!
sleep 8  # past the first prefills: the steady mix of decode and new prompts
perf record -q -F 2999 -p "$server" -o "$out/perf.data" -- sleep "$seconds" 2> /dev/null
wait $client || true
perf report -i "$out/perf.data" --no-children --sort sym -g none 2> /dev/null > "$out/symbols.txt"
/usr/bin/python3 "$here/profile_groups.py" "$out/symbols.txt"
grep -E "TTFT|TPOT|throughput" "$out/client.txt" || true
