"""Per-request results and their summary: percentiles, throughput, cached-token share."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional, Sequence


def percentile(values: Sequence[float], p: float) -> Optional[float]:
    """The p-th percentile (0..100) with linear interpolation between closest ranks (numpy's
    default, "linear"); None for no values."""
    if not 0 <= p <= 100:
        raise ValueError(f"percentile {p} is outside 0..100")
    if not values:
        return None
    xs = sorted(values)
    rank = (len(xs) - 1) * p / 100.0
    lo, hi = math.floor(rank), math.ceil(rank)
    return xs[lo] + (xs[hi] - xs[lo]) * (rank - lo)


@dataclasses.dataclass
class RequestResult:
    """What one request did. Times are seconds on the client's monotonic clock."""

    session: int
    turn: int
    prompt_len: int  # tokens sent (ids) or words (text)
    max_tokens: int
    start: float = 0.0  # when the request was sent
    end: float = 0.0  # when its stream ended (or it failed)
    ttft: Optional[float] = None  # send -> first chunk carrying text or token ids
    itl: list[float] = dataclasses.field(default_factory=list)  # gaps between content chunks
    content_chunks: int = 0
    prompt_tokens: Optional[int] = None  # usage.prompt_tokens
    completion_tokens: Optional[int] = None  # usage.completion_tokens
    cached_tokens: Optional[int] = None  # usage.prompt_tokens_details.cached_tokens
    timings_cache_n: Optional[int] = None  # llama-server's timings.cache_n
    finish_reason: Optional[str] = None
    error: Optional[str] = None  # set when the request failed
    unfinished: bool = False  # still running when --max-seconds cut the run

    @property
    def ok(self) -> bool:
        return self.error is None and not self.unfinished

    @property
    def e2e(self) -> float:
        return self.end - self.start

    @property
    def output_tokens(self) -> int:
        """usage.completion_tokens, else the number of content chunks."""
        return self.completion_tokens if self.completion_tokens is not None else self.content_chunks

    def cached(self) -> tuple[Optional[int], str]:
        """Cached prompt tokens and where they came from."""
        if self.cached_tokens is not None:
            return self.cached_tokens, "usage.prompt_tokens_details.cached_tokens"
        if self.timings_cache_n is not None:
            return self.timings_cache_n, "timings.cache_n"
        return None, "none"


def _dist(values: Sequence[float]) -> dict[str, Optional[float]]:
    return {
        "mean": (sum(values) / len(values)) if values else None,
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "max": max(values) if values else None,
        "n": len(values),
    }


def summarize(results: Sequence[RequestResult], not_sent: int = 0) -> dict[str, Any]:
    """Every number the client reports, as a JSON-ready dict. Latency distributions and
    throughput count successful requests only; the duration runs from the first send to the last
    end of any request."""
    ok = [r for r in results if r.ok]
    failed = [r for r in results if r.error is not None]
    unfinished = [r for r in results if r.unfinished and r.error is None]
    duration = (max(r.end for r in results) - min(r.start for r in results)) if results else 0.0
    out_tokens = sum(r.output_tokens for r in ok)
    tpot = [(r.e2e - r.ttft) / (r.output_tokens - 1) for r in ok
            if r.ttft is not None and r.output_tokens > 1]
    cached_sum, prompt_sum, sources = 0, 0, set()
    for r in ok:
        cached, source = r.cached()
        if cached is not None and r.prompt_tokens:
            cached_sum += cached
            prompt_sum += r.prompt_tokens
            sources.add(source)
    short = [r for r in ok if r.output_tokens < r.max_tokens]
    return {
        "requests": {"sent": len(results), "completed": len(ok), "failed": len(failed),
                     "lost": len(unfinished), "not_sent": not_sent,
                     "short_outputs": len(short)},
        "duration_s": duration,
        "request_throughput_rps": len(ok) / duration if duration > 0 else None,
        "output_token_throughput_tps": out_tokens / duration if duration > 0 else None,
        "output_tokens": out_tokens,
        "prompt_tokens": sum(r.prompt_tokens or 0 for r in ok),
        "ttft_s": _dist([r.ttft for r in ok if r.ttft is not None]),
        "itl_s": _dist([g for r in ok for g in r.itl]),
        "tpot_s": _dist(tpot),
        "e2e_s": _dist([r.e2e for r in ok]),
        "cached_tokens": cached_sum,
        "cached_share": cached_sum / prompt_sum if prompt_sum else None,
        "cached_source": ",".join(sorted(sources)) or "none",
        "errors": [f"session {r.session} turn {r.turn}: {r.error}" for r in failed],
    }


def _ms(x: Optional[float]) -> str:
    return "-" if x is None else f"{x * 1000:.1f}"


def format_table(summary: dict[str, Any]) -> str:
    """The human-readable report."""
    req = summary["requests"]
    lines = [
        f"requests: {req['completed']} completed, {req['failed']} failed, {req['lost']} lost "
        f"(cut at --max-seconds), {req['not_sent']} not sent; {req['short_outputs']} stopped "
        f"before max_tokens",
        f"duration: {summary['duration_s']:.2f} s",
        f"{'metric':<16}{'mean':>10}{'p50':>10}{'p90':>10}{'p99':>10}{'max':>10}   (ms)",
    ]
    for key, name in (("ttft_s", "TTFT"), ("itl_s", "inter-token"), ("tpot_s", "TPOT"),
                      ("e2e_s", "end-to-end")):
        d = summary[key]
        lines.append(f"{name:<16}" + "".join(f"{_ms(d[k]):>10}"
                                             for k in ("mean", "p50", "p90", "p99", "max")))
    rps, tps = summary["request_throughput_rps"], summary["output_token_throughput_tps"]
    lines.append(f"throughput: {'-' if rps is None else f'{rps:.3f}'} req/s, "
                 f"{'-' if tps is None else f'{tps:.1f}'} output tokens/s "
                 f"({summary['output_tokens']} output tokens)")
    share = summary["cached_share"]
    lines.append(f"cached prompt tokens: {summary['cached_tokens']} of {summary['prompt_tokens']}"
                 f" = {'-' if share is None else f'{share:.1%}'} (from {summary['cached_source']})")
    return "\n".join(lines)
