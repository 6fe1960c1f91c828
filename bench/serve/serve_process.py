"""`pagedkv serve` as a child process for the bench scripts beside this file: start it on a free
port and wait until it is ready, and time one JSON request. Standard library only.

    from serve_process import start, post_json
    proc, port = start("build/pagedkv", ["--model", model])
    seconds, reply = post_json(port, "/v1/completions", {"prompt": [1, 2, 3], "max_tokens": 1})
"""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import time


def start(cli: str, args: list[str]) -> tuple[subprocess.Popen, int]:
    """Runs `cli serve --port 0 ARGS`; returns the process and its port once its banner says
    ready. RuntimeError when it exits first."""
    proc = subprocess.Popen([cli, "serve", "--port", "0", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    port = 0
    for line in proc.stderr:
        m = re.search(r"listening on http://[0-9.]+:(\d+)", line)
        if m:
            port = int(m.group(1))
        if "ready:" in line:
            return proc, port
    raise RuntimeError("pagedkv serve exited before it was ready")


def post_json(port: int, path: str, body: dict) -> tuple[float, dict]:
    """POSTs `body` to `path`; returns the seconds to the whole answer and its JSON.
    RuntimeError on a status other than 200."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    start_s = time.perf_counter()
    conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    reply = json.loads(response.read())
    if response.status != 200:
        raise RuntimeError(f"HTTP {response.status}: {reply}")
    return time.perf_counter() - start_s, reply
