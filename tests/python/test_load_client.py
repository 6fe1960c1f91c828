"""Tests of the serve load client (bench/serve/) that need no model server: workload
construction, percentile math, the summary, and the HTTP/SSE reader against a scripted fake
server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import gzip
import json
import pathlib
import sys

import pytest

SERVE = pathlib.Path(__file__).resolve().parents[2] / "bench" / "serve"
sys.path.insert(0, str(SERVE))

import load_client  # noqa: E402
import sse_http  # noqa: E402
import stats  # noqa: E402
import workloads  # noqa: E402

SPACE = workloads.TokenSpace(vocab=49152, min_id=100, seed=7)


def test_random_ids_are_deterministic_and_in_range() -> None:
    a = workloads.random_ids(SPACE, "k", 500)
    assert a == workloads.random_ids(SPACE, "k", 500)
    assert a != workloads.random_ids(SPACE, "other", 500)
    assert a != workloads.random_ids(workloads.TokenSpace(49152, 100, seed=8), "k", 500)
    assert all(100 <= t < 49152 for t in a)
    with pytest.raises(ValueError):
        workloads.random_ids(workloads.TokenSpace(vocab=10, min_id=10), "k", 1)


def test_shared_prefix_shares_exactly_the_system_part() -> None:
    sessions = workloads.shared_prefix(8, system_tokens=1000, user_tokens=32, output_tokens=64,
                                       space=SPACE)
    assert len(sessions) == 8
    prompts = [s.requests[0].prompt for s in sessions]
    assert all(len(p) == 1032 for p in prompts)
    assert all(p[:1000] == prompts[0][:1000] for p in prompts)
    assert len({tuple(p[1000:]) for p in prompts}) == 8  # unique user parts
    assert all(s.requests[0].max_tokens == 64 for s in sessions)


def test_shared_prefix_user_seed_keeps_the_system_part() -> None:
    a = workloads.shared_prefix(4, 50, 5, 8, SPACE)
    b = workloads.shared_prefix(4, 50, 5, 8, SPACE, user_seed=99)
    assert all(x.requests[0].prompt[:50] == y.requests[0].prompt[:50] for x, y in zip(a, b))
    assert not {tuple(x.requests[0].prompt) for x in a} & {tuple(y.requests[0].prompt) for y in b}


def test_shared_prefix_text_mode() -> None:
    sessions = workloads.shared_prefix(3, 50, 5, 8, SPACE, text=True)
    prompts = [s.requests[0].prompt for s in sessions]
    assert all(isinstance(p, str) and len(p.split()) == 55 for p in prompts)
    system = prompts[0].split()[:50]
    assert all(p.split()[:50] == system for p in prompts)
    assert len(set(prompts)) == 3


def test_conversation_turns_extend_the_previous_prompt() -> None:
    sessions = workloads.conversation(3, turns=4, system_tokens=100, user_tokens=10,
                                      output_tokens=20, space=SPACE)
    assert [len(s.requests) for s in sessions] == [4, 4, 4]
    for s in sessions:
        for prev, cur in zip(s.requests, s.requests[1:]):
            assert cur.prompt[:len(prev.prompt)] == prev.prompt
            assert len(cur.prompt) == len(prev.prompt) + 20 + 10
            assert cur.turn == prev.turn + 1
    firsts = [s.requests[0].prompt for s in sessions]
    assert len({tuple(p[:100]) for p in firsts}) == 3  # each session has its own system part


def test_conversation_shared_system_part_comes_first_in_every_session() -> None:
    sessions = workloads.conversation(3, turns=2, system_tokens=40, user_tokens=10,
                                      output_tokens=5, space=SPACE, shared_system_tokens=24)
    firsts = [s.requests[0].prompt for s in sessions]
    assert all(len(p) == 24 + 40 + 10 for p in firsts)
    assert len({tuple(p[:24]) for p in firsts}) == 1  # one shared part
    assert len({tuple(p[24:64]) for p in firsts}) == 3  # then each session's own
    plain = workloads.conversation(3, turns=2, system_tokens=40, user_tokens=10,
                                   output_tokens=5, space=SPACE)
    assert [s.requests[0].prompt[24:] for s in sessions] == [s.requests[0].prompt for s in plain]
    with pytest.raises(ValueError, match="shared_system_tokens"):
        workloads.conversation(1, 1, 4, 4, 4, SPACE, shared_system_tokens=-1)


def _write_trace(path: pathlib.Path, rows: list[dict]) -> None:
    with gzip.open(path, "wt") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def test_mooncake_scaling_keeps_equal_hash_ids_equal(tmp_path: pathlib.Path) -> None:
    trace = tmp_path / "t.jsonl.gz"
    _write_trace(trace, [
        {"timestamp": 1000, "input_length": 1500, "output_length": 300, "hash_ids": [0, 1, 2]},
        {"timestamp": 1500, "input_length": 1100, "output_length": 5, "hash_ids": [0, 1, 9]},
        {"timestamp": 3000, "input_length": 100000, "output_length": 7, "hash_ids":
         list(range(20, 216))},
    ])
    records = workloads.read_mooncake(trace)
    scaling = workloads.MooncakeScaling(block_tokens=16, max_input_tokens=256,
                                        max_output_tokens=128, time_scale=0.5)
    s = workloads.mooncake(records, scaling, SPACE)
    a, b, c = (x.requests[0] for x in s)
    assert len(a.prompt) == round(1500 * 16 / 512)  # 47: two full blocks and part of a third
    assert len(b.prompt) == round(1100 * 16 / 512)  # 34
    assert a.prompt[:32] == b.prompt[:32]  # hash ids 0 and 1 are shared
    assert a.prompt[32:34] != b.prompt[32:34]  # hash id 2 vs 9
    assert a.prompt[:16] == workloads.block_ids(SPACE, 0, 16)
    assert len(c.prompt) == 256  # capped
    assert (a.max_tokens, b.max_tokens, c.max_tokens) == (128, 5, 7)
    assert [x.arrival_s for x in s] == [0.0, 0.25, 1.0]
    assert workloads.read_mooncake(trace, limit=2)[-1].input_length == 1100


def test_mooncake_reads_the_shared_trace() -> None:
    from conftest import shared_data_dir
    trace = shared_data_dir() / "traces" / "conversation_trace.jsonl.gz"
    if not trace.exists():
        pytest.skip(f"{trace} not found")
    records = workloads.read_mooncake(trace, limit=50)
    s = workloads.mooncake(records, workloads.MooncakeScaling(), SPACE)
    assert len(s) == 50
    by_first = {}
    for rec, sess in zip(records, s):
        by_first.setdefault(rec.hash_ids[0], []).append(sess.requests[0].prompt[:16])
    for prefixes in by_first.values():
        assert all(p == prefixes[0] for p in prefixes)


def test_mooncake_rejects_a_malformed_line(tmp_path: pathlib.Path) -> None:
    trace = tmp_path / "bad.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 5}\n')
    with pytest.raises(ValueError, match="bad.jsonl:1"):
        workloads.read_mooncake(trace)


def test_poisson_arrivals_are_increasing_with_the_right_mean() -> None:
    sessions = [workloads.Session([]) for _ in range(4000)]
    workloads.poisson_arrivals(sessions, rate=10.0, seed=1)
    t = [s.arrival_s for s in sessions]
    assert t[0] == 0.0 and all(b >= a for a, b in zip(t, t[1:]))
    assert abs(t[-1] / (len(t) - 1) - 0.1) < 0.01


def test_percentile_matches_linear_interpolation() -> None:
    assert stats.percentile([], 50) is None
    assert stats.percentile([3.0], 99) == 3.0
    assert stats.percentile([4, 1, 3, 2], 50) == 2.5
    assert stats.percentile([1, 2, 3, 4, 5], 0) == 1
    assert stats.percentile([1, 2, 3, 4, 5], 100) == 5
    assert stats.percentile(list(range(1, 101)), 99) == pytest.approx(99.01)
    assert stats.percentile([10, 20], 25) == pytest.approx(12.5)
    with pytest.raises(ValueError):
        stats.percentile([1], 101)


def _result(start: float, ttft: float, end: float, **kw) -> stats.RequestResult:
    r = stats.RequestResult(session=0, turn=0, prompt_len=100, max_tokens=3, start=start,
                            end=end, ttft=ttft, **kw)
    return r


def test_summary_counts_throughput_and_cached_share() -> None:
    rs = [
        _result(0.0, 0.1, 1.0, itl=[0.2, 0.3], completion_tokens=3, prompt_tokens=100,
                cached_tokens=0),
        _result(0.5, 0.2, 2.0, itl=[0.4], completion_tokens=3, prompt_tokens=100,
                cached_tokens=96),
        _result(0.5, None, 0.6, error="HTTP 500: boom"),
        _result(1.0, 0.1, 2.0, unfinished=True),
    ]
    s = stats.summarize(rs, not_sent=2)
    assert s["requests"] == {"sent": 4, "completed": 2, "failed": 1, "lost": 1, "not_sent": 2,
                             "short_outputs": 0}
    assert s["duration_s"] == 2.0
    assert s["request_throughput_rps"] == 1.0
    assert s["output_token_throughput_tps"] == 3.0
    assert s["cached_share"] == pytest.approx(96 / 200)
    assert s["cached_source"] == "usage.prompt_tokens_details.cached_tokens"
    assert s["ttft_s"]["p50"] == pytest.approx(0.15)
    assert s["itl_s"]["n"] == 3 and s["itl_s"]["p50"] == pytest.approx(0.3)
    assert s["e2e_s"]["p50"] == pytest.approx(1.25)
    assert s["errors"] == ["session 0 turn 0: HTTP 500: boom"]
    assert "TTFT" in stats.format_table(s)


def test_summary_falls_back_to_llama_server_timings() -> None:
    r = _result(0.0, 0.1, 1.0, completion_tokens=3, prompt_tokens=200, timings_cache_n=150)
    s = stats.summarize([r])
    assert s["cached_share"] == 0.75 and s["cached_source"] == "timings.cache_n"
    assert stats.summarize([_result(0, 0.1, 1, prompt_tokens=5)])["cached_share"] is None


def test_endpoint_parse() -> None:
    ep = sse_http.Endpoint.parse("http://127.0.0.1:8080")
    assert (ep.host, ep.port, ep.prefix) == ("127.0.0.1", 8080, "/v1")
    assert sse_http.Endpoint.parse("http://localhost:9/v1/").prefix == "/v1"
    assert sse_http.Endpoint.parse("http://localhost:9/proxy").prefix == "/proxy/v1"
    assert ep.is_loopback()
    with pytest.raises(ValueError):
        sse_http.Endpoint.parse("https://127.0.0.1:8080")


def _chunked(data: bytes, piece: int = 7) -> bytes:
    out = b""
    for i in range(0, len(data), piece):
        part = data[i:i + piece]
        out += f"{len(part):x}\r\n".encode() + part + b"\r\n"
    return out + b"0\r\n\r\n"


def _fake_stream(n_tokens: int, prompt_tokens: int, cached: int) -> bytes:
    events = [{"choices": [{"index": 0, "text": f" t{i}", "finish_reason": None}]}
              for i in range(n_tokens)]
    events.append({"choices": [{"index": 0, "text": "", "finish_reason": "length"}],
                   "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": n_tokens,
                             "prompt_tokens_details": {"cached_tokens": cached}}})
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\r\n\r\n" for e in events)
    return body + b": comment\n\ndata: [DONE]\n\n"


async def _serve_once(handler) -> tuple[asyncio.AbstractServer, int]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def test_client_reads_a_chunked_sse_stream_from_a_fake_server() -> None:
    seen: list[dict] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int([h for h in head.decode().split("\r\n")
                      if h.lower().startswith("content-length")][0].split(":")[1])
        body = json.loads(await reader.readexactly(length))
        seen.append(body)
        if body["max_tokens"] == 99:
            writer.write(b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 4\r\n\r\nbusy")
        else:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n" +
                         _chunked(_fake_stream(body["max_tokens"], len(body["prompt"]), 16)))
        await writer.drain()
        writer.close()

    async def go() -> tuple[list[stats.RequestResult], int]:
        server, port = await _serve_once(handler)
        async with server:
            cfg = load_client.ClientConfig(sse_http.Endpoint.parse(f"http://127.0.0.1:{port}"),
                                           model="m", api_key="k")
            sessions = workloads.shared_prefix(3, 20, 4, 5, SPACE)
            sessions.append(workloads.Session([workloads.Request([1, 2], 99, session=3)]))
            return await load_client.run_workload(
                sessions, cfg, load_client.Arrivals("concurrency", 2, max_seconds=30))

    results, not_sent = asyncio.run(go())
    assert not_sent == 0 and len(results) == 4
    ok = sorted((r for r in results if r.ok), key=lambda r: r.session)
    assert [r.session for r in ok] == [0, 1, 2]
    for r in ok:
        assert r.content_chunks == 5 and r.completion_tokens == 5 and len(r.itl) == 4
        assert r.prompt_tokens == 24 and r.cached_tokens == 16 and r.finish_reason == "length"
        assert r.ttft is not None and 0 <= r.ttft <= r.e2e
    bad = [r for r in results if not r.ok]
    assert len(bad) == 1 and bad[0].error == "HTTP 429: busy"
    body = seen[0]
    assert body["stream"] is True and body["ignore_eos"] is True and body["temperature"] == 0
    assert body["stream_options"] == {"include_usage": True} and body["model"] == "m"


def test_a_stream_without_done_is_an_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\n\r\n"
                     b'data: {"choices": [{"text": "a"}]}\n\n')  # then close: no [DONE]
        await writer.drain()
        writer.close()

    async def go() -> stats.RequestResult:
        server, port = await _serve_once(handler)
        async with server:
            cfg = load_client.ClientConfig(sse_http.Endpoint.parse(f"http://127.0.0.1:{port}"))
            res = stats.RequestResult(0, 0, 1, 1)
            await load_client.send(workloads.Request([5], 1), cfg, res)
            return res

    res = asyncio.run(go())
    assert res.error == "stream ended without data: [DONE]" and res.ttft is not None


def test_parse_args_defaults() -> None:
    a = load_client.parse_args(["--base-url", "http://127.0.0.1:1"])
    assert (a.workload, a.system_tokens, a.user_tokens, a.output_tokens) == (
        "shared-prefix", 1000, 32, 64)
    assert a.concurrency == 1 and a.ignore_eos is True
    assert load_client.parse_args(["--base-url", "http://127.0.0.1:1",
                                   "--no-ignore-eos"]).ignore_eos is False
    with pytest.raises(SystemExit):
        load_client.parse_args(["--base-url", "http://127.0.0.1:1", "--workload", "mooncake"])


def test_warmup_uses_other_user_parts() -> None:
    a = load_client.parse_args(["--base-url", "http://127.0.0.1:1", "--num-requests", "4",
                                "--warmup", "2", "--system-tokens", "10", "--user-tokens", "3"])
    measured, warm = load_client.build(a)
    assert len(measured) == 4 and len(warm) == 2
    assert warm[0].requests[0].prompt[:10] == measured[0].requests[0].prompt[:10]
    assert all(w.requests[0].prompt != m.requests[0].prompt for w in warm for m in measured)
