#!/usr/bin/python3
"""Load client for OpenAI-compatible servers (pagedkv serve, llama.cpp's llama-server, vLLM).

Replays a workload with arrival times against one base URL with streaming /v1/completions and
reports TTFT, inter-token and end-to-end latency (p50/p99), request and output-token throughput,
the cached-token share, and failed or lost requests. Standard library only (Python 3.11).

    /usr/bin/python3 bench/serve/load_client.py --base-url http://127.0.0.1:8080 \\
        --workload shared-prefix --num-requests 64 --concurrency 8 --vocab 49152 --json out.json

Exits 0 when every request completed, 1 when any failed or was lost, 2 on a usage error.
See bench/serve/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import pathlib
import sys
import time
from typing import Any, Optional

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import sse_http  # noqa: E402
import stats  # noqa: E402
import workloads  # noqa: E402


@dataclasses.dataclass
class ClientConfig:
    """How each request is sent."""

    endpoint: sse_http.Endpoint
    model: Optional[str] = None  # the "model" field; omitted when None
    api_key: Optional[str] = None  # sent as a Bearer token
    ignore_eos: bool = True  # ask for exactly max_tokens tokens (vLLM / llama-server extension)
    request_timeout_s: float = 300.0  # a request running longer fails
    extra_body: dict = dataclasses.field(default_factory=dict)  # merged into every request body


def request_body(req: workloads.Request, cfg: ClientConfig) -> dict[str, Any]:
    body: dict[str, Any] = {"prompt": req.prompt, "max_tokens": req.max_tokens,
                            "temperature": 0, "stream": True,
                            "stream_options": {"include_usage": True}}
    if cfg.model:
        body["model"] = cfg.model
    if cfg.ignore_eos:
        body["ignore_eos"] = True
    body.update(cfg.extra_body)
    return body


def _read_chunk(chunk: dict, res: stats.RequestResult, now: float, last: list[float]) -> None:
    """Folds one streamed completion chunk into `res`."""
    content = False
    for choice in chunk.get("choices") or []:
        if choice.get("text") or choice.get("token_ids") or choice.get("tokens"):
            content = True
        if choice.get("finish_reason"):
            res.finish_reason = choice["finish_reason"]
    if content:
        if res.ttft is None:
            res.ttft = now - res.start
        else:
            res.itl.append(now - last[0])
        last[0] = now
        res.content_chunks += 1
    usage = chunk.get("usage")
    if isinstance(usage, dict):
        res.prompt_tokens = usage.get("prompt_tokens", res.prompt_tokens)
        res.completion_tokens = usage.get("completion_tokens", res.completion_tokens)
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict) and details.get("cached_tokens") is not None:
            res.cached_tokens = int(details["cached_tokens"])
    timings = chunk.get("timings")
    if isinstance(timings, dict) and timings.get("cache_n") is not None:
        res.timings_cache_n = int(timings["cache_n"])


async def _stream(req: workloads.Request, cfg: ClientConfig, res: stats.RequestResult) -> None:
    resp = await sse_http.request(cfg.endpoint, "POST", cfg.endpoint.prefix + "/completions",
                                  request_body(req, cfg), cfg.api_key)
    try:
        if resp.status != 200:
            text = (await resp.body(1 << 16)).decode("utf-8", "replace")
            res.error = f"HTTP {resp.status}: {text[:300]}"
            return
        last = [0.0]
        async for data in sse_http.sse_events(resp):
            if data.strip() == "[DONE]":
                return
            chunk = json.loads(data)
            if "error" in chunk:
                res.error = f"error in stream: {json.dumps(chunk['error'])[:300]}"
                return
            _read_chunk(chunk, res, time.perf_counter(), last)
        res.error = "stream ended without data: [DONE]"
    finally:
        resp.close()


async def send(req: workloads.Request, cfg: ClientConfig, res: stats.RequestResult) -> None:
    """Runs one streaming request into `res` (which the caller already holds)."""
    res.start = time.perf_counter()
    try:
        async with asyncio.timeout(cfg.request_timeout_s):
            await _stream(req, cfg, res)
    except TimeoutError:
        res.error = f"no end of stream within --request-timeout {cfg.request_timeout_s} s"
    except asyncio.CancelledError:
        res.unfinished = True
        raise
    except (OSError, sse_http.HttpError, ValueError, asyncio.IncompleteReadError) as e:
        res.error = f"{type(e).__name__}: {e}"
    finally:
        res.end = time.perf_counter()


@dataclasses.dataclass
class Arrivals:
    """When sessions start."""

    mode: str  # "concurrency" (closed loop), "rate" or "trace" (each session at its arrival_s)
    concurrency: Optional[int] = None  # closed loop width; in timed modes a cap on in flight
    max_seconds: float = 600.0  # the run is cut here; requests in flight count as lost
    think_time_s: float = 0.0  # pause between a session's turns


async def run_workload(sessions: list[workloads.Session], cfg: ClientConfig,
                       arrivals: Arrivals) -> tuple[list[stats.RequestResult], int]:
    """Sends every session; returns the results of the requests sent and how many were not."""
    results: list[stats.RequestResult] = []
    limit = asyncio.Semaphore(arrivals.concurrency or 1 << 30)

    async def run_session(s: workloads.Session) -> None:
        for i, req in enumerate(s.requests):
            if i and arrivals.think_time_s:
                await asyncio.sleep(arrivals.think_time_s)
            res = stats.RequestResult(req.session, req.turn, req.prompt_len, req.max_tokens)
            async with limit:
                results.append(res)
                await send(req, cfg, res)

    t0 = time.perf_counter()
    if arrivals.mode == "concurrency":
        queue = list(reversed(sessions))

        async def worker() -> None:
            while queue:
                await run_session(queue.pop())

        tasks = [asyncio.create_task(worker()) for _ in range(arrivals.concurrency or 1)]
    else:
        async def at(s: workloads.Session) -> None:
            await asyncio.sleep(max(0.0, t0 + s.arrival_s - time.perf_counter()))
            await run_session(s)

        tasks = [asyncio.create_task(at(s)) for s in sessions]
    _, pending = await asyncio.wait(tasks, timeout=arrivals.max_seconds)
    for t in pending:
        t.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    total = sum(len(s.requests) for s in sessions)
    return results, total - len(results)


async def discover_model(ep: sse_http.Endpoint, api_key: Optional[str]) -> Optional[str]:
    """The first id that GET /v1/models lists, or None."""
    try:
        resp = await asyncio.wait_for(sse_http.request(ep, "GET", ep.prefix + "/models",
                                                       api_key=api_key), 10)
        try:
            if resp.status != 200:
                return None
            data = json.loads(await asyncio.wait_for(resp.body(), 10))
        finally:
            resp.close()
        return data["data"][0]["id"]
    except (OSError, sse_http.HttpError, ValueError, KeyError, IndexError, TypeError,
            TimeoutError):
        return None


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--base-url", required=True, help="http://HOST:PORT (or .../v1)")
    p.add_argument("--api-key", help="sent as Authorization: Bearer KEY")
    p.add_argument("--model", help="the model field (default: first of GET /v1/models)")
    p.add_argument("--workload", choices=["shared-prefix", "conversation", "mooncake"],
                   default="shared-prefix")
    g = p.add_argument_group("built-in workloads")
    g.add_argument("--num-requests", type=int, default=64, help="shared-prefix requests")
    g.add_argument("--sessions", type=int, default=8, help="conversation sessions")
    g.add_argument("--turns", type=int, default=4, help="turns per conversation session")
    g.add_argument("--system-tokens", type=int, default=1000)
    g.add_argument("--shared-system-tokens", type=int, default=0,
                   help="conversation: a system part every session shares, before its own")
    g.add_argument("--user-tokens", type=int, default=32)
    g.add_argument("--output-tokens", type=int, default=64)
    g.add_argument("--text", action="store_true", help="text prompts (words) instead of ids")
    g.add_argument("--vocab", type=int, default=32000, help="token ids are below this")
    g.add_argument("--min-id", type=int, default=100, help="token ids are at least this")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--user-seed", type=int, help="shared-prefix: seed of the user parts only "
                   "(default --seed); a new one per run keeps the system part and repeats no "
                   "prompt of an earlier run")
    g = p.add_argument_group("mooncake trace")
    g.add_argument("--trace", type=pathlib.Path, help="Mooncake JSONL(.gz)")
    g.add_argument("--block-tokens", type=int, default=16, help="tokens per hash id")
    g.add_argument("--max-input-tokens", type=int, default=2048)
    g.add_argument("--max-output-tokens", type=int, default=128)
    g.add_argument("--limit", type=int, default=200, help="first N trace records")
    g.add_argument("--time-scale", type=float, default=1.0, help="multiplies arrival gaps")
    g = p.add_argument_group("arrivals and limits")
    g.add_argument("--concurrency", type=int, help="closed loop with C in flight (or a cap "
                   "with --rate / trace arrivals)")
    g.add_argument("--rate", type=float, help="Poisson arrivals, sessions per second")
    g.add_argument("--max-seconds", type=float, default=600.0, help="cut the run here")
    g.add_argument("--request-timeout", type=float, default=300.0)
    g.add_argument("--think-time", type=float, default=0.0, help="seconds between turns")
    g.add_argument("--warmup", type=int, default=0, help="requests sent one by one first, "
                   "not counted (shared-prefix: same system part, other user parts)")
    g = p.add_argument_group("requests and output")
    g.add_argument("--no-ignore-eos", dest="ignore_eos", action="store_false",
                   help="do not send ignore_eos: true")
    g.add_argument("--extra-body", type=json.loads, default={}, help="JSON merged into bodies")
    g.add_argument("--json", type=pathlib.Path, help="write every number here")
    g.add_argument("--allow-non-loopback", action="store_true",
                   help="allow a base URL that is not on this machine")
    args = p.parse_args(argv)
    if args.workload == "mooncake" and not args.trace:
        p.error("--workload mooncake needs --trace")
    if args.concurrency is not None and args.concurrency < 1:
        p.error("--concurrency must be at least 1")
    if args.concurrency is None and args.rate is None and args.workload != "mooncake":
        args.concurrency = 1
    return args


def build(args: argparse.Namespace) -> tuple[list[workloads.Session], list[workloads.Session]]:
    """(measured sessions, warm-up sessions)."""
    space = workloads.TokenSpace(args.vocab, args.min_id, args.seed)
    if args.workload == "shared-prefix":
        both = workloads.shared_prefix(args.num_requests + args.warmup, args.system_tokens,
                                       args.user_tokens, args.output_tokens, space, args.text,
                                       args.user_seed)
        return both[:args.num_requests], both[args.num_requests:]
    if args.workload == "conversation":
        sessions = workloads.conversation(args.sessions, args.turns, args.system_tokens,
                                          args.user_tokens, args.output_tokens, space, args.text,
                                          args.shared_system_tokens)
    else:
        scaling = workloads.MooncakeScaling(args.block_tokens, 512, args.max_input_tokens,
                                            args.max_output_tokens, args.time_scale)
        sessions = workloads.mooncake(workloads.read_mooncake(args.trace, args.limit), scaling,
                                      space)
    warm = [workloads.Session([s.requests[0]]) for s in sessions[:args.warmup]]
    return sessions, warm


def arrivals_of(args: argparse.Namespace, sessions: list[workloads.Session]) -> Arrivals:
    if args.rate is not None:
        workloads.poisson_arrivals(sessions, args.rate, args.seed)
        return Arrivals("rate", args.concurrency, args.max_seconds, args.think_time)
    if args.workload == "mooncake" and args.concurrency is None:
        return Arrivals("trace", None, args.max_seconds, args.think_time)
    return Arrivals("concurrency", args.concurrency, args.max_seconds, args.think_time)


async def main_async(args: argparse.Namespace) -> int:
    ep = sse_http.Endpoint.parse(args.base_url)
    if not args.allow_non_loopback and not ep.is_loopback():
        print(f"{ep.host} is not a loopback address; pass --allow-non-loopback to target it",
              file=sys.stderr)
        return 2
    model = args.model or await discover_model(ep, args.api_key)
    cfg = ClientConfig(ep, model, args.api_key, args.ignore_eos, args.request_timeout,
                       args.extra_body)
    sessions, warm = build(args)
    arrivals = arrivals_of(args, sessions)
    print(f"{args.workload}: {sum(len(s.requests) for s in sessions)} requests in "
          f"{len(sessions)} sessions, arrivals {arrivals.mode}"
          f"{'' if arrivals.concurrency is None else f' (concurrency {arrivals.concurrency})'}"
          f", model {model or '(none sent)'}", file=sys.stderr)
    warm_results, _ = await run_workload(warm, cfg, Arrivals("concurrency", 1, args.max_seconds))
    warm_errors = [r.error for r in warm_results if r.error]
    results, not_sent = await run_workload(sessions, cfg, arrivals)
    summary = stats.summarize(results, not_sent)
    summary["warmup"] = {"requests": len(warm_results), "errors": warm_errors}
    print(stats.format_table(summary))
    if args.json:
        config = {k: (str(v) if isinstance(v, pathlib.Path) else v) for k, v in vars(args).items()}
        config["model_sent"] = model
        args.json.write_text(json.dumps({
            "config": config, "summary": summary,
            "requests": [dataclasses.asdict(r) | {"e2e": r.e2e} for r in results]}, indent=1))
    errors = summary["errors"] + [f"warm-up: {e}" for e in warm_errors]
    for e in errors[:20]:
        print(f"error: {e}", file=sys.stderr)
    if len(errors) > 20:
        print(f"... and {len(errors) - 20} more errors", file=sys.stderr)
    lost = summary["requests"]["lost"]
    if lost:
        print(f"error: {lost} requests were still running at --max-seconds", file=sys.stderr)
    return 1 if errors or lost else 0


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return asyncio.run(main_async(args))
    except ValueError as e:  # bad workload parameters or trace
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
