"""A real `pagedkv serve` process for the tests: started on a free loopback port, ready once it
says so on stderr (no polling, no sleeps), stopped with a signal."""

from __future__ import annotations

import http.client
import json
import pathlib
import queue
import re
import signal
import subprocess
import threading

STARTUP_TIMEOUT_S = 120


class Server:
    """`pagedkv serve ARGS --port 0`, ready once it says so on stderr."""

    def __init__(self, cli: pathlib.Path, args: list[str]):
        self.proc = subprocess.Popen([str(cli), "serve", "--port", "0", *args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
        self.lines: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        self.host, self.port = "", 0
        while True:
            try:
                line = self._lines.get(timeout=STARTUP_TIMEOUT_S)
            except queue.Empty:
                self.proc.kill()
                raise RuntimeError("pagedkv serve did not start: " + "".join(self.lines))
            if line is None:
                raise RuntimeError("pagedkv serve exited: " + "".join(self.lines))
            m = re.search(r"listening on http://([0-9.]+):(\d+)", line)
            if m:
                self.host, self.port = m.group(1), int(m.group(2))
            if "ready:" in line:
                break
        self.base_url = f"http://{self.host}:{self.port}"

    def _read_stderr(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line)
            self._lines.put(line)
        self._lines.put(None)

    def request(self, method: str, path: str, body=None, headers=None):
        """(status, headers, parsed JSON or text) of one request on a fresh connection."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
        data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
        conn.request(method, path, body=data, headers=headers or {})
        resp = conn.getresponse()
        raw = resp.read().decode()
        conn.close()
        try:
            parsed = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            parsed = raw
        return resp.status, dict(resp.getheaders()), parsed

    def metrics(self) -> dict[str, float]:
        """The unlabelled samples of GET /metrics."""
        status, _, text = self.request("GET", "/metrics")
        assert status == 200
        samples = {}
        for line in text.splitlines():
            if line and not line.startswith("#") and "{" not in line:
                name, value = line.rsplit(" ", 1)
                samples[name] = float(value)
        return samples

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 120) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
