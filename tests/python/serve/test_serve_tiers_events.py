"""`pagedkv serve` with the engine's other parts on: KV events on a real ZeroMQ socket, the
host-memory tier below a pool too small for the working set, and a real Redis server shared by
two server processes."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess

import msgpack
import pytest
import zmq
from serve_util import Server


def _mentions(value, word) -> bool:
    if isinstance(value, (list, tuple)):
        return any(_mentions(v, word) for v in value)
    if isinstance(value, dict):
        return any(_mentions(k, word) or _mentions(v, word) for k, v in value.items())
    if isinstance(value, bytes):
        return value == word.encode()
    return value == word


def test_kv_events_are_published_while_serving(cli_module, aidreams_args):
    # A tcp:// address without '*' is connected to, as vLLM does: the subscriber binds.
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.setsockopt(zmq.RCVTIMEO, 200)
    port = sub.bind_to_random_port("tcp://127.0.0.1")
    server = Server(cli_module, [*aidreams_args, "--kv-events-endpoint",
                                 f"tcp://127.0.0.1:{port}"])
    try:
        stored = False
        for i in range(50):  # until the subscription has reached the publisher
            # A new first block each time, so that every request stores blocks.
            prompt = f"{i} upon a time, in a land far away, lived a dreamer who sang"
            assert server.request("POST", "/v1/completions",
                                  {"prompt": prompt, "max_tokens": 4})[0] == 200
            try:
                while not stored:
                    frames = sub.recv_multipart()
                    stored = _mentions(msgpack.unpackb(frames[-1], raw=False), "BlockStored")
            except zmq.Again:
                pass
            if stored:
                break
        assert stored, "no BlockStored event arrived"
    finally:
        sub.close(linger=0)
        ctx.term()
        assert server.stop() == 0


def test_kv_events_bind_a_free_loopback_port_and_say_which(cli_module, aidreams_args):
    # tcp://127.0.0.1:* binds (as vLLM binds, for routers that connect, e.g. vllm-router) on a
    # free port; serve names the ports it took before "ready:".
    server = Server(cli_module, [*aidreams_args, "--kv-events-endpoint", "tcp://127.0.0.1:*",
                                 "--kv-events-replay-endpoint", "tcp://127.0.0.1:*"])
    ctx = zmq.Context()
    try:
        line = next(x for x in server.lines if "kv events on" in x)
        m = re.search(r"kv events on (tcp://127\.0\.0\.1:\d+) \(replay "
                      r"(tcp://127\.0\.0\.1:\d+)\)", line)
        assert m, line
        sub = ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        sub.setsockopt(zmq.RCVTIMEO, 10000)
        sub.connect(m.group(1))
        # The publisher holds its first batch until this subscription arrives.
        assert server.request("POST", "/v1/completions",
                              {"prompt": "Once upon a time, in a land far away, lived a dreamer",
                               "max_tokens": 4})[0] == 200
        frames = sub.recv_multipart()
        assert frames[1] == (0).to_bytes(8, "big")
        assert _mentions(msgpack.unpackb(frames[-1], raw=False), "BlockStored")
        dealer = ctx.socket(zmq.DEALER)
        dealer.setsockopt(zmq.RCVTIMEO, 10000)
        dealer.connect(m.group(2))
        dealer.send_multipart([b"", (0).to_bytes(8, "big")])
        assert dealer.recv_multipart()[1:] == frames[1:]  # [empty, seq, payload]
        sub.close(linger=0)
        dealer.close(linger=0)
    finally:
        ctx.term()
        assert server.stop() == 0


def _cached_tokens_of_a_revisit(cli_module, aidreams_args, tier_flags):
    """Prompt A, then B and C (which evict A from a 16-block device pool: each request holds 12),
    then A again: the cached tokens of the second A (its text must be the first's)."""
    server = Server(cli_module, [*aidreams_args, "--block-size", "4", "--num-kv-blocks", "16",
                                 *tier_flags])
    try:
        def run(prompt):
            status, _, body = server.request("POST", "/v1/completions",
                                             {"prompt": prompt, "max_tokens": 8,
                                              "temperature": 0})
            assert status == 200, body
            return body
        a = "Once upon a time, in a land far away, there lived a dreamer"
        first = run(a)
        run("Echoes of the stars sang softly to the sleeping sea at night, and the waves")
        run("The sky was painted in colors that no one had ever seen before, bright and")
        again = run(a)
        assert again["choices"][0]["text"] == first["choices"][0]["text"]
        return again["usage"]["prompt_tokens_details"]["cached_tokens"]
    finally:
        assert server.stop() == 0


def test_the_host_tier_serves_what_the_device_pool_evicted(cli_module, aidreams_args):
    assert _cached_tokens_of_a_revisit(cli_module, aidreams_args, []) == 0
    assert _cached_tokens_of_a_revisit(cli_module, aidreams_args,
                                       ["--host-cache-blocks", "256"]) > 0


@pytest.fixture
def redis_url():
    """A real redis-server on a free loopback port, persistence off; its URL."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        if "Ready to accept connections" in line:
            break
    else:
        pytest.fail("redis-server did not start")
    yield f"redis://127.0.0.1:{port}"
    proc.terminate()
    proc.wait()


def test_two_servers_share_blocks_through_redis(cli_module, aidreams_args, redis_url):
    prompt = "Once upon a time, in a land far away, there lived a dreamer who sang to the stars"
    body = {"prompt": prompt, "max_tokens": 8, "temperature": 0}
    answers = []
    for _ in range(2):  # the second server starts empty: its prefix comes from Redis
        server = Server(cli_module, [*aidreams_args, "--remote-cache", redis_url])
        try:
            status, _, answer = server.request("POST", "/v1/completions", body)
            assert status == 200, answer
            answers.append(answer)
        finally:
            assert server.stop() == 0
    assert answers[0]["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert answers[1]["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
    assert answers[1]["choices"][0]["text"] == answers[0]["choices"][0]["text"]
