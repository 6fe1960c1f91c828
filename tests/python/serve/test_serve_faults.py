"""`pagedkv serve` under what clients and operators do wrong or abruptly: bad bodies, a wrong
key, a full queue, a client that disconnects mid-stream, SIGTERM while requests run. After each
the server still answers /health and holds no KV block for a finished or aborted request."""

from __future__ import annotations

import json
import signal
import socket
import threading

import pytest
from serve_util import Server

POLL_LIMIT = 400  # bounded waits: at most this many /metrics reads


def _wait_for(server, name, value):
    for _ in range(POLL_LIMIT):
        if server.metrics().get(name) == value:
            return
    pytest.fail(f"{name} never became {value}: {server.metrics().get(name)}")


def _open_stream(server, body):
    """A raw socket with a streaming completion sent and its first SSE event read."""
    sock = socket.create_connection((server.host, server.port), timeout=60)
    data = json.dumps({**body, "stream": True}).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 + f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
    received = b""
    while b"data: " not in received:
        chunk = sock.recv(4096)
        assert chunk, received
        received += chunk
    assert received.startswith(b"HTTP/1.1 200"), received
    return sock


def _read_all(sock):
    received = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return received.decode()
        received += chunk
        if b"data: [DONE]" in received:
            return received.decode()


@pytest.fixture(scope="module")
def aidreams_server(cli_module, aidreams_args):
    server = Server(cli_module, [*aidreams_args, "--max-request-bytes", "4096",
                                 "--api-key", "sesame"])
    yield server
    assert server.stop() == 0


AUTH = {"Authorization": "Bearer sesame", "Content-Type": "application/json"}


@pytest.mark.parametrize("body, status, param", [
    ('{"prompt": "Once", "max_tokens": 4', 400, None),          # malformed JSON
    ('[1, 2]', 400, None),                                      # not an object
    ('{"prompt": 5}', 400, "prompt"),                           # wrong type
    ('{"prompt": "Once", "max_tokens": -1}', 400, "max_tokens"),
    ('{"prompt": "Once", "n": 17}', 400, "n"),
    ('{"prompt": "Once", "temperature": "hot"}', 400, "temperature"),
    ('{"prompt": [1, 999999]}', 400, None),                     # id past the vocabulary
    ('{"prompt": "Once", "max_tokens": 100000}', 400, None),    # past the context
    ('{"prompt": "Once", "model": "gpt-4"}', 404, None),
    ('{"prompt": "Once", "priority": 3}', 400, "priority"),
    # Fields pagedkv does not implement: refused, never silently ignored.
    ('{"prompt": "Once", "bad_words": ["x"]}', 400, "bad_words"),
    ('{"prompt": "Once", "response_format": {"type": "json_object"}}', 400, "response_format"),
    # Implemented sampling fields, out of vLLM's ranges or past the vocabulary.
    ('{"prompt": "Once", "repetition_penalty": 0}', 400, "repetition_penalty"),
    ('{"prompt": "Once", "logit_bias": {"512": 100}}', 400, "logit_bias"),
    ('{"prompt": "Once", "top_k": -2}', 400, "top_k"),
    ('{"prompt": "Once", "max_tokens": 2, "min_tokens": 3}', 400, "min_tokens"),
])
def test_bad_requests_get_openai_errors(aidreams_server, body, status, param):
    got, _, error = aidreams_server.request("POST", "/v1/completions", body, AUTH)
    assert got == status, error
    assert set(error["error"]) == {"message", "type", "param", "code"}
    assert error["error"]["code"] == status
    assert error["error"]["param"] == param
    assert error["error"]["message"]
    assert aidreams_server.request("GET", "/health")[0] == 200


def test_pipelined_requests_are_each_answered_in_order(aidreams_server):
    # Three requests in one write on one connection: HTTP/1.1 wants three answers, in order.
    def post(prompt):
        body = json.dumps({"prompt": prompt, "max_tokens": 2, "temperature": 0}).encode()
        return (b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer sesame\r\n"
                b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                % (len(body), body))
    def complete(data):  # three answers, the last one's body whole
        answers = data.split(b"HTTP/1.1 ")[1:]
        if len(answers) < 3 or b"\r\n\r\n" not in answers[2]:
            return False
        head, body = answers[2].split(b"\r\n\r\n", 1)
        length = [int(h.split(b":")[1]) for h in head.split(b"\r\n")
                  if h.lower().startswith(b"content-length:")]
        return length and len(body) >= length[0]

    wire = (post("Once") + b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n" +
            post("The sun was shining and the birds sang in the tall green trees"))
    with socket.create_connection((aidreams_server.host, aidreams_server.port), timeout=60) as s:
        s.sendall(wire)
        data = b""
        while not complete(data):
            chunk = s.recv(65536)
            assert chunk, data  # the server closed before answering all three
            data += chunk
    answers = data.split(b"HTTP/1.1 ")[1:]
    assert [a.split(b"\r\n", 1)[0] for a in answers] == [b"200 OK"] * 3, data
    first, health, last = (a.split(b"\r\n\r\n", 1)[1] for a in answers)
    assert json.loads(first)["usage"]["prompt_tokens"] < json.loads(last)["usage"]["prompt_tokens"]
    assert health == b""


def test_limits_and_keys(aidreams_server):
    big = json.dumps({"prompt": "x" * 5000})
    status, _, error = aidreams_server.request("POST", "/v1/completions", big, AUTH)
    assert status == 413 and "--max-request-bytes" in error["error"]["message"]
    status, _, error = aidreams_server.request("POST", "/v1/completions", '{"prompt": "a"}',
                                               {"Authorization": "Bearer wrong"})
    assert status == 401 and error["error"]["type"] == "authentication_error"
    assert aidreams_server.request("POST", "/v1/completions", '{"prompt": "a"}')[0] == 401
    assert aidreams_server.request("GET", "/v1/models")[0] == 401
    assert aidreams_server.request("GET", "/no/such/route")[0] == 404
    assert aidreams_server.request("GET", "/health")[0] == 200  # open, as in vLLM
    assert aidreams_server.request("GET", "/metrics")[0] == 200
    m = aidreams_server.metrics()
    assert m["pagedkv_requests_rejected_total"] >= 3
    assert m["pagedkv_kv_cache_usage_ratio"] == 0.0


@pytest.fixture
def smollm2_server(cli_module, smollm2_args):
    server = Server(cli_module, [*smollm2_args, "--num-kv-blocks", "2048", "--max-num-seqs", "1",
                                 "--max-queued-requests", "1", "--drain-timeout-s", "60"])
    yield server
    server.stop(signal.SIGKILL)


def test_disconnect_mid_stream_aborts_and_frees_blocks(smollm2_server):
    sock = _open_stream(smollm2_server, {"prompt": "Tell me a long story.", "max_tokens": 500,
                                         "ignore_eos": True, "temperature": 0})
    sock.close()
    _wait_for(smollm2_server, "pagedkv_requests_aborted_total", 1.0)
    m = smollm2_server.metrics()
    assert m["pagedkv_kv_cache_usage_ratio"] == 0.0
    assert m["pagedkv_generation_tokens_total"] < 500
    assert smollm2_server.request("GET", "/health")[0] == 200


def test_a_full_queue_answers_429_with_retry_after(smollm2_server):
    running = _open_stream(smollm2_server, {"prompt": "Count to a thousand.", "max_tokens": 400,
                                            "ignore_eos": True, "temperature": 0})
    waiting_result = {}
    waiter = threading.Thread(target=lambda: waiting_result.update(
        r=smollm2_server.request("POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 2})))
    waiter.start()
    _wait_for(smollm2_server, "pagedkv_num_requests_waiting", 1.0)
    status, headers, error = smollm2_server.request("POST", "/v1/completions",
                                                    {"prompt": "Hi", "max_tokens": 2})
    assert status == 429
    assert headers.get("Retry-After") == "1"
    assert error["error"]["type"] == "rate_limit_error"
    running.close()  # the running one goes away: the waiting one runs
    waiter.join()
    assert waiting_result["r"][0] == 200
    _wait_for(smollm2_server, "pagedkv_kv_cache_usage_ratio", 0.0)
    assert smollm2_server.request("GET", "/health")[0] == 200


def test_sigterm_drains_running_requests_then_exits_0(smollm2_server):
    sock = _open_stream(smollm2_server, {"prompt": "Hello", "max_tokens": 24, "ignore_eos": True,
                                         "temperature": 0})
    smollm2_server.proc.send_signal(signal.SIGTERM)
    for _ in range(POLL_LIMIT):
        if smollm2_server.request("GET", "/health")[0] == 503:
            break
    status, _, error = smollm2_server.request("POST", "/v1/completions", {"prompt": "late"})
    assert status == 503 and "shutting down" in error["error"]["message"]
    rest = _read_all(sock)
    assert '"finish_reason":"length"' in rest and "data: [DONE]\n\n" in rest
    assert smollm2_server.proc.wait(timeout=120) == 0


def test_sigterm_past_the_drain_timeout_aborts(cli_module, smollm2_args):
    server = Server(cli_module, [*smollm2_args, "--num-kv-blocks", "2048",
                                 "--drain-timeout-s", "0.2"])
    sock = _open_stream(server, {"prompt": "Hello", "max_tokens": 4000, "ignore_eos": True,
                                 "temperature": 0})
    server.proc.send_signal(signal.SIGTERM)
    rest = _read_all(sock)
    assert '"finish_reason":"abort"' in rest
    assert server.proc.wait(timeout=120) == 0
    assert any("drain timeout" in line for line in server.lines)
