#!/bin/bash
# Resident memory of `pagedkv serve` with and without a disk tier: after loading, right after
# four 2,000-token prompts (their blocks stored on disk), and 10 s later (the writer frees its
# spare encode buffers after 5 s idle: DiskTierOptions::spare_buffer_idle).
#
#   bash bench/serve/disk_idle_rss.sh build/pagedkv ~/.cache/pagedkv/models/SmolLM2-135M-Instruct.Q4_1.gguf
set -euo pipefail
CLI=${1:?usage: disk_idle_rss.sh CLI MODEL}
MODEL=${2:?usage: disk_idle_rss.sh CLI MODEL}
PORT=${PORT:-18124}

run() {  # $@: extra serve flags
  "$CLI" serve --model "$MODEL" --port "$PORT" "$@" >/dev/null 2>&1 &
  local pid=$!
  for _ in $(seq 150); do curl -sf "localhost:$PORT/health" >/dev/null && break; sleep 0.2; done
  rss() { awk '/VmRSS/ {printf "%.0f MB", $2 / 1024}' "/proc/$pid/status"; }
  local loaded; loaded=$(rss)
  /usr/bin/python3 - "$PORT" <<'PY'
import json, random, sys, urllib.request
rng = random.Random(3)
for _ in range(4):
    body = {"prompt": [rng.randrange(100, 49152) for _ in range(2000)], "max_tokens": 4,
            "temperature": 0}
    req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/v1/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    json.load(urllib.request.urlopen(req))
PY
  local after; after=$(rss)
  sleep 10
  echo "${LABEL}: loaded ${loaded}, after the prompts ${after}, 10 s later $(rss)"
  kill "$pid"; wait "$pid" 2>/dev/null || true
}

DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
LABEL="no disk tier" run
LABEL="disk tier" run --disk-cache "$DIR" --disk-cache-size 4G
