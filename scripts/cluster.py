#!/usr/bin/python3
"""N `pagedkv serve` instances behind vllm-router, sharing one Redis tier, on this machine.

Usage (standard library only: Debian's /usr/bin/python3 runs it; vllm-router comes from
scripts/python_refs.sh's venv, ~/.cache/pagedkv/pyref):

  M=$(bash scripts/fetch_models.sh)
  scripts/cluster.py --instances 4 --model "$M" --policy kv_aware          # until Ctrl-C
  scripts/cluster.py --instances 4 --model "$M" --policy kv_aware \\
      --run '/usr/bin/python3 bench/serve/load_client.py --base-url $ROUTER_URL ...'
  scripts/cluster.py --instances 2 --model M.bin --tokenizer T.bin -- --block-size 8

What it starts, all on 127.0.0.1, each on a free port:
  - one redis-server (persistence off), the shared tier of every instance
    (`--remote-cache redis://127.0.0.1:PORT`; `--no-redis` leaves it out);
  - N `pagedkv serve` instances (`--port 0`), each publishing its KV events on
    `--kv-events-endpoint tcp://127.0.0.1:*` and answering replays on
    `--kv-events-replay-endpoint tcp://127.0.0.1:*`: bound on loopback, as vLLM binds, since
    vllm-router connects to both; the ports each took are read from its "kv events on" line;
  - vllm-router with `--policy` (kv_aware, cache_aware, round_robin, ...); for kv_aware,
    `--kv-event-source URL=tcp://...` and `--kv-event-replay-source URL=tcp://...` per
    instance, `--kv-event-model` (the served model name) and `--kv-event-block-size`;
    with `--routers K`, K such replicas behind a round-robin TCP balancer ($ROUTER_URL).
Readiness comes from each process's own signal: redis-server's "Ready to accept connections",
serve's "ready:" line, vllm-router's "Starting server on" log line (vllm-router waits for every
worker's /health itself). Everything is stopped on exit, on Ctrl-C and on SIGTERM: the routers
first, then the instances (SIGTERM: they drain), then Redis. Logs go to --log-dir. See
docs/cluster.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

REPO = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_ROUTER = pathlib.Path.home() / ".cache" / "pagedkv" / "pyref" / "bin" / "vllm-router"
POLICIES = ["kv_aware", "cache_aware", "round_robin", "random", "power_of_two",
            "consistent_hash", "sticky_least_loaded"]
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# vllm-router (debug log level) after it applied a batch of an instance's events.
ADVANCED = re.compile(r"kv_index (?:live|replay) sequence advanced.*?source=(\S+).*?seq=(-?\d+)")


class ClusterError(RuntimeError):
    pass


def find_router(explicit: str | None = None) -> pathlib.Path | None:
    """vllm-router: explicit, $PAGEDKV_VLLM_ROUTER, the reference venv, then PATH."""
    for candidate in (explicit, os.environ.get("PAGEDKV_VLLM_ROUTER"), str(DEFAULT_ROUTER),
                      shutil.which("vllm-router")):
        if candidate and pathlib.Path(candidate).exists():
            return pathlib.Path(candidate)
    return None


def free_port() -> int:
    """A loopback port free now (vllm-router and redis-server take no port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Process:
    """A child process whose output lines are kept, copied to a log file and waited on."""

    def __init__(self, name: str, argv: list[str], log_path: pathlib.Path):
        self.name, self.argv = name, argv
        self.log = open(log_path, "w", buffering=1)
        self.log.write("$ " + shlex.join(argv) + "\n")
        # A session of its own: Ctrl-C reaches only the launcher, which stops children in order.
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, errors="replace",
                                     start_new_session=True)
        self.lines: list[str] = []
        self._cv = threading.Condition()
        self._eof = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for raw in self.proc.stdout:
            line = ANSI.sub("", raw)
            self.log.write(line)
            with self._cv:
                self.lines.append(line)
                self._cv.notify_all()
        with self._cv:
            self._eof = True
            self._cv.notify_all()

    def wait_for(self, pattern: str | re.Pattern, timeout: float, start: int = 0) -> re.Match:
        """The first match of `pattern` in a line from index `start` on; ClusterError if the
        process exits or `timeout` seconds pass first."""
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout
        i = start
        with self._cv:
            while True:
                while i < len(self.lines):
                    m = rx.search(self.lines[i])
                    i += 1
                    if m:
                        return m
                if self._eof:
                    raise ClusterError(f"{self.name} exited (status {self.proc.wait()}) before "
                                       f"'{rx.pattern}':\n" + "".join(self.lines[-20:]))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ClusterError(f"{self.name}: no '{rx.pattern}' within {timeout:.0f} s:\n"
                                       + "".join(self.lines[-20:]))
                self._cv.wait(left)

    def stop(self, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            status = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            status = self.proc.wait()
        self._reader.join(timeout=10)  # the rest of its output, up to EOF
        self.proc.stdout.close()
        self.log.close()
        return status


class Balancer:
    """A TCP round-robin balancer (what an L4 load balancer or round-robin DNS does in front of
    router replicas), on a free loopback port, in a thread: connection k goes to backend
    k mod n. load_client.py opens one connection per request, so its requests alternate."""

    def __init__(self, backends: list[tuple[str, int]]):
        self.backends, self._next, self.port = backends, 0, 0
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self._thread.start()
        ready.wait()

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        ready.set()
        self.loop.run_forever()
        server.close()

    async def _handle(self, reader, writer) -> None:
        host, port = self.backends[self._next % len(self.backends)]
        self._next += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.close()
            return

        async def pipe(src, dst) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                dst.close()
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)


class Instance:
    def __init__(self, process: Process, url: str, events: str, replay: str):
        self.process, self.url, self.events, self.replay = process, url, events, replay


class Cluster:
    """Redis + N instances + vllm-router; a context manager that stops everything on exit.

    cli: the pagedkv binary; model_args: --model ... [--tokenizer ...]; serve_args: more serve
    flags for every instance; router_args: more vllm-router flags."""

    def __init__(self, cli: pathlib.Path, model_args: list[str], *, instances: int = 2,
                 policy: str = "kv_aware", served_model_name: str = "", redis: bool = True,
                 routers: int = 1,
                 threads: int = 1, serve_args: list[str] | None = None,
                 router: pathlib.Path | None = None, router_args: list[str] | None = None,
                 router_log_level: str = "info", log_dir: pathlib.Path | None = None,
                 startup_timeout_s: float = 300):
        if instances < 1:
            raise ClusterError("--instances must be at least 1")
        if policy not in POLICIES:
            raise ClusterError(f"unknown --policy {policy}: one of {', '.join(POLICIES)}")
        self.router_path = router or find_router()
        if self.router_path is None:
            raise ClusterError("vllm-router is not installed: run scripts/python_refs.sh "
                               "(or give --router / PAGEDKV_VLLM_ROUTER)")
        if redis and shutil.which("redis-server") is None:
            raise ClusterError("redis-server is not installed (apt-get install redis-server), "
                               "or pass --no-redis")
        self.cli, self.model_args, self.policy = cli, model_args, policy
        self.num_instances, self.use_redis, self.threads = instances, redis, threads
        if routers < 1:
            raise ClusterError("--routers must be at least 1")
        self.num_routers = routers
        self.serve_args = list(serve_args or [])
        self.router_args = list(router_args or [])
        self.router_log_level = router_log_level
        self.timeout = startup_timeout_s
        model = model_args[model_args.index("--model") + 1]
        self.model_name = served_model_name or pathlib.Path(model).name
        self.block_size = 16
        if "--block-size" in self.serve_args:
            self.block_size = int(self.serve_args[self.serve_args.index("--block-size") + 1])
        self.log_dir = log_dir or pathlib.Path(f"/tmp/pagedkv-cluster-{os.getpid()}")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.redis: Process | None = None
        self.redis_url = ""
        self.instances: list[Instance] = []
        self.routers: list[Process] = []
        self.router: Process | None = None  # the first replica
        self.router_urls: list[str] = []
        self.prometheus_urls: list[str] = []
        self.balancer: Balancer | None = None
        self.router_url = ""  # the router, or with replicas the balancer in front of them

    def __enter__(self) -> "Cluster":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        if self.use_redis:
            self._start_redis()
        self._start_instances()
        self._start_router()

    def _start_redis(self) -> None:
        port = free_port()
        self.redis = Process("redis-server", ["redis-server", "--port", str(port), "--bind",
                                              "127.0.0.1", "--save", "", "--appendonly", "no"],
                             self.log_dir / "redis.log")
        self.redis.wait_for("Ready to accept connections", self.timeout)
        self.redis_url = f"redis://127.0.0.1:{port}"

    def _start_instances(self) -> None:
        procs = []
        for i in range(self.num_instances):  # all load at once, then each is waited for
            argv = [str(self.cli), "serve", *self.model_args, "--port", "0",
                    "--served-model-name", self.model_name, "--threads", str(self.threads),
                    "--kv-events-endpoint", "tcp://127.0.0.1:*",
                    "--kv-events-replay-endpoint", "tcp://127.0.0.1:*",
                    # Hold the first batch until a subscriber is there (the router starts last).
                    "--kv-events-wait-subscriber-s", "600"]
            if self.redis_url:
                argv += ["--remote-cache", self.redis_url]
            procs.append(Process(f"instance {i}", argv + self.serve_args,
                                 self.log_dir / f"instance{i}.log"))
        for p in procs:
            url = p.wait_for(r"listening on (http://127\.0\.0\.1:\d+)", self.timeout).group(1)
            events = p.wait_for(r"kv events on (tcp://\S+) \(replay (tcp://\S+)\)", self.timeout)
            p.wait_for(r"\bready:", self.timeout)
            self.instances.append(Instance(p, url, events.group(1), events.group(2)))

    def _start_router(self) -> None:
        for r in range(self.num_routers):  # replicas: the same flags, their own ports
            port, prometheus_port = free_port(), free_port()
            argv = [str(self.router_path), "--host", "127.0.0.1", "--port", str(port),
                    "--prometheus-host", "127.0.0.1", "--prometheus-port", str(prometheus_port),
                    "--policy", self.policy, "--log-level", self.router_log_level,
                    "--worker-startup-check-interval", "1",
                    "--worker-urls", *[inst.url for inst in self.instances]]
            if self.policy == "kv_aware":
                for inst in self.instances:
                    argv += ["--kv-event-source", f"{inst.url}={inst.events}",
                             "--kv-event-replay-source", f"{inst.url}={inst.replay}"]
                argv += ["--kv-event-model", self.model_name,
                         "--kv-event-block-size", str(self.block_size)]
            name = "router.log" if r == 0 else f"router{r}.log"
            router = Process(f"vllm-router {r}", argv + self.router_args, self.log_dir / name)
            self.routers.append(router)
            router.wait_for(rf"Starting server on 127\.0\.0\.1:{port}", self.timeout)
            self._wait_listening(router, port)
            if self.policy == "kv_aware":
                # Its event subscribers start after it serves; a batch sent before one has
                # subscribed is lost to it (vllm-router asks for a replay only on a gap after a
                # batch it received), so wait for each one's own "subscriber ... on" line.
                for inst in self.instances:
                    router.wait_for(rf"kv_index subscriber for {re.escape(inst.url)} rank0 on "
                                    rf"{re.escape(inst.events)}", self.timeout)
            self.router_urls.append(f"http://127.0.0.1:{port}")
            self.prometheus_urls.append(f"http://127.0.0.1:{prometheus_port}")
        self.router = self.routers[0]
        self.prometheus_url = self.prometheus_urls[0]
        if self.num_routers == 1:
            self.router_url = self.router_urls[0]
        else:
            self.balancer = Balancer([("127.0.0.1", int(u.rsplit(":", 1)[1]))
                                      for u in self.router_urls])
            self.router_url = f"http://127.0.0.1:{self.balancer.port}"

    @staticmethod
    def _wait_listening(router: Process, port: int) -> None:
        # The log line comes just before the listener is bound: connect until it is (bounded).
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                if router.proc.poll() is not None or time.monotonic() > deadline:
                    raise ClusterError(f"{router.name} does not accept connections:\n" +
                                       "".join(router.lines[-20:]))
                time.sleep(0.01)

    def indexed_seq(self, instance: int) -> int:
        """The highest event batch of `instance` that every router replica has said it applied
        (-1: none yet). Needs router_log_level="debug" (the lines are debug lines)."""
        url = self.instances[instance].url
        per_router = []
        for router in self.routers:
            seqs = [int(m.group(2)) for m in map(ADVANCED.search, list(router.lines))
                    if m and m.group(1) == url]
            per_router.append(max(seqs, default=-1))
        return min(per_router)

    def wait_indexed(self, instance: int, seq: int, timeout: float = 30) -> None:
        """Waits until every vllm-router replica says it applied event batch `seq` (or a later
        one) of `instance`. Needs router_log_level="debug" (the line is a debug line)."""
        url = self.instances[instance].url
        for router in self.routers:
            start = 0
            while True:
                m = router.wait_for(ADVANCED, timeout, start)
                start = router.lines.index(m.string, start) + 1
                if m.group(1) == url and int(m.group(2)) >= seq:
                    break

    def wait_subscribed(self, probe, timeout: float = 60) -> None:
        """Waits until every router replica has applied a batch of every instance, so that it
        receives all later ones (and asks for a replay on a gap). A batch sent before a
        replica's subscription has arrived is lost to it, and vllm-router asks for replays
        only after a first batch: `probe(instance, k)` must make the instance publish a new
        batch (a request with a new prompt straight to it); k = 1, 2, ... are sent while some
        replica has not reported one within 2 s. Needs router_log_level="debug"."""
        deadline = time.monotonic() + timeout
        for i in range(len(self.instances)):
            k = 0
            probe(i, k)
            while True:
                try:
                    self.wait_indexed(i, 0, timeout=2)
                    break
                except ClusterError:
                    if time.monotonic() > deadline:
                        raise
                    k += 1
                    probe(i, k)

    def stop(self) -> None:
        """Routers, then instances (they drain), then Redis. Safe to call twice."""
        if self.balancer is not None:
            self.balancer.stop()
            self.balancer = None
        for router in self.routers:
            router.stop()
        self.routers, self.router = [], None
        for inst in self.instances:
            inst.process.stop()
        self.instances = []
        if self.redis is not None:
            self.redis.stop()
            self.redis = None

    def instance_metrics(self) -> list[dict[str, float]]:
        """Each instance's unlabelled /metrics samples (pagedkv_requests_received_total, ...)."""
        out = []
        for inst in self.instances:
            with urllib.request.urlopen(inst.url + "/metrics", timeout=30) as r:
                text = r.read().decode()
            samples = {}
            for line in text.splitlines():
                if line and not line.startswith("#") and "{" not in line:
                    name, value = line.rsplit(" ", 1)
                    samples[name] = float(value)
            out.append(samples)
        return out

    def describe(self) -> str:
        lines = [f"router   {self.router_url}  (policy {self.policy}, "
                 f"metrics {self.prometheus_url}/metrics)"]
        if self.balancer is not None:
            lines[0] = f"router   {self.router_url}  (round-robin balancer, policy {self.policy})"
            lines += [f"replica {r}  {u}  (metrics {m}/metrics)" for r, (u, m) in
                      enumerate(zip(self.router_urls, self.prometheus_urls))]
        for i, inst in enumerate(self.instances):
            lines.append(f"instance {i} {inst.url}  events {inst.events}  replay {inst.replay}")
        if self.redis_url:
            lines.append(f"redis    {self.redis_url}")
        lines.append(f"logs     {self.log_dir}")
        return "\n".join(lines)


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    serve_extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, serve_extra = argv[:cut], argv[cut + 1:]
    p = argparse.ArgumentParser(
        description="N pagedkv serve instances behind vllm-router, sharing one Redis tier. "
                    "Flags after -- go to every `pagedkv serve`.")
    p.add_argument("--instances", "-n", type=int, default=2)
    p.add_argument("--model", required=True, help="what `pagedkv serve --model` takes")
    p.add_argument("--tokenizer", help="for llama2.c models")
    p.add_argument("--served-model-name", default="", help="default: the model's file name")
    p.add_argument("--policy", default="kv_aware", choices=POLICIES)
    p.add_argument("--threads", type=int, default=1, help="--threads of every instance")
    p.add_argument("--no-redis", action="store_true", help="no shared Redis tier")
    p.add_argument("--cli", default=str(REPO / "build" / "pagedkv"), help="the pagedkv binary")
    p.add_argument("--routers", type=int, default=1,
                   help="vllm-router replicas (same flags); with more than one, $ROUTER_URL is "
                        "a TCP round-robin balancer in front of them (per connection)")
    p.add_argument("--router", help="the vllm-router binary (default: the reference venv's)")
    p.add_argument("--router-arg", action="append", default=[],
                   help="one more vllm-router argument (repeat)")
    p.add_argument("--router-log-level", default="info")
    p.add_argument("--log-dir", type=pathlib.Path)
    p.add_argument("--run", help="a shell command to run once ready ($ROUTER_URL, "
                                 "$INSTANCE_URLS set); the cluster stops when it ends and its "
                                 "status is the launcher's")
    p.add_argument("--metrics-json", type=pathlib.Path,
                   help="with --run: each instance's /metrics after the command, as JSON")
    return p.parse_args(argv), serve_extra


REPORTED = [("requests", "pagedkv_requests_received_total"),
            ("prompt tokens", "pagedkv_prompt_tokens_total"),
            ("prefix queries", "pagedkv_prefix_cache_queries_total"),
            ("prefix hits", "pagedkv_prefix_cache_hits_total"),
            ("evicted blocks", "pagedkv_prefix_cache_evicted_blocks_total")]


def report_instances(metrics: list[dict[str, float]], path: pathlib.Path | None) -> None:
    """Prints, per instance, the requests it received and its prefix-cache counters."""
    print("instance " + "".join(f"{name:>16}" for name, _ in REPORTED))
    for i, m in enumerate(metrics):
        print(f"{i:>8} " + "".join(f"{m.get(key, 0):>16.0f}" for _, key in REPORTED))
    if path is not None:
        path.write_text(json.dumps(metrics, indent=1) + "\n")


def main(argv: list[str]) -> int:
    args, serve_extra = parse_args(argv)
    model_args = ["--model", args.model] + (["--tokenizer", args.tokenizer]
                                            if args.tokenizer else [])

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    try:
        with Cluster(pathlib.Path(args.cli), model_args, instances=args.instances,
                     policy=args.policy, served_model_name=args.served_model_name,
                     redis=not args.no_redis, routers=args.routers, threads=args.threads,
                     serve_args=serve_extra,
                     router=pathlib.Path(args.router) if args.router else None,
                     router_args=args.router_arg, router_log_level=args.router_log_level,
                     log_dir=args.log_dir) as cluster:
            print("cluster ready:\n" + cluster.describe(), flush=True)
            if args.run:
                env = dict(os.environ, ROUTER_URL=cluster.router_url,
                           INSTANCE_URLS=" ".join(i.url for i in cluster.instances))
                status = subprocess.run(args.run, shell=True, env=env).returncode
                report_instances(cluster.instance_metrics(), args.metrics_json)
                return status
            while True:
                signal.pause()  # until Ctrl-C or SIGTERM
    except KeyboardInterrupt:
        print("cluster: stopping", file=sys.stderr)
        return 0
    except ClusterError as e:
        print(f"cluster: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
