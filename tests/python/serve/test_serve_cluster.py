"""Two `pagedkv serve` instances behind the real vllm-router (`--policy kv_aware`, fed by each
instance's KV events over ZeroMQ), sharing one real redis-server, started by scripts/cluster.py:
a request whose prefix one instance holds is routed to that instance, and its answer is a single
instance's."""

from __future__ import annotations

import pathlib
import shutil
import sys

import pytest
from serve_util import Server

sys.path.insert(0, str(pathlib.Path(__file__).parents[3] / "scripts"))
import cluster  # noqa: E402  (scripts/cluster.py, the launcher under test)

# Long enough for 4 full blocks of 16 tokens (aidreams260K's context is 128 tokens).
PREFIX = {0: "The little robot walked through the quiet town at night, looking at the bright "
             "stars above and humming a happy song to itself.",
          1: "Once upon a time there was a little girl named Lily. She loved to play outside "
             "in the park with her friends every day."}


@pytest.fixture(scope="module")
def router_path() -> pathlib.Path:
    path = cluster.find_router()
    if path is None:
        pytest.skip("vllm-router is not installed: run scripts/python_refs.sh (it installs "
                    "vllm-router==0.1.17 into ~/.cache/pagedkv/pyref)")
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    return path


def _complete(base_url: str, prompt: str) -> dict:
    server = _Client(base_url)
    status, _, body = server.request("POST", "/v1/completions",
                                     {"prompt": prompt, "max_tokens": 12, "temperature": 0},
                                     {"Content-Type": "application/json"})
    assert status == 200, body
    return body


class _Client(Server):
    """serve_util.Server's request() and metrics() against a URL, without a process."""

    def __init__(self, base_url: str):  # noqa: super().__init__ would start a server
        self.host, port = base_url.removeprefix("http://").split(":")
        self.port = int(port)


def _probe(c: cluster.Cluster):
    """A request with a new prompt straight to instance i: it publishes new blocks."""
    return lambda i, k: _complete(c.instances[i].url, f"Probe {i} {k}: " + PREFIX[i][::-1])


def _warm(c: cluster.Cluster, i: int, prompt: str) -> None:
    """`prompt` straight to instance i, then waits until every router replica applied it."""
    seen = c.indexed_seq(i)
    _complete(c.instances[i].url, prompt)
    c.wait_indexed(i, seen + 1)  # its first batch stores the prompt's blocks


def _received(url: str) -> float:
    return _Client(url).metrics()["pagedkv_requests_received_total"]


def _hits(url: str) -> float:
    return _Client(url).metrics()["pagedkv_prefix_cache_hits_total"]


def test_kv_aware_routes_a_request_to_the_instance_holding_its_prefix(
        cli_module, aidreams_args, router_path, tmp_path):
    with cluster.Cluster(cli_module, aidreams_args, instances=2, policy="kv_aware",
                         router=router_path, router_log_level="debug",
                         log_dir=tmp_path) as c:
        urls = [inst.url for inst in c.instances]
        c.wait_subscribed(_probe(c))
        # Each instance learns its own prefix straight from a client, not through the router:
        # the router can know where a prefix is only from that instance's KV events.
        for i in (1, 0):
            _warm(c, i, PREFIX[i] + " The end.")
        for i in (1, 0, 1):
            before = [_received(u) for u in urls]
            hits_before = _hits(urls[i])
            routed = _complete(c.router_url, PREFIX[i] + " And then")
            after = [_received(u) for u in urls]
            assert after[i] == before[i] + 1, (i, before, after)
            assert after[1 - i] == before[1 - i], (i, before, after)
            assert routed["usage"]["prompt_tokens_details"]["cached_tokens"] >= 64
            assert _hits(urls[i]) >= hits_before + 64
        single = Server(cli_module, aidreams_args)  # one instance, no router, no tier
        try:
            for i in (0, 1):
                alone = _complete(single.base_url, PREFIX[i] + " And then")
                again = _complete(c.router_url, PREFIX[i] + " And then")
                assert again["choices"][0]["text"] == alone["choices"][0]["text"]
                assert alone["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
        finally:
            assert single.stop() == 0


def test_router_replicas_behind_a_balancer_all_follow_the_events(
        cli_module, aidreams_args, router_path, tmp_path):
    # Two kv_aware replicas, requests alternating between them: both route to the instance
    # that holds the prefix, as each reads every instance's events.
    with cluster.Cluster(cli_module, aidreams_args, instances=2, policy="kv_aware", routers=2,
                         redis=False, router=router_path, router_log_level="debug",
                         log_dir=tmp_path) as c:
        urls = [inst.url for inst in c.instances]
        c.wait_subscribed(_probe(c))
        _warm(c, 1, PREFIX[1] + " The end.")
        before = [_received(u) for u in urls]
        for _ in range(2):  # one through each replica
            _complete(c.router_url, PREFIX[1] + " And then")
        after = [_received(u) for u in urls]
        assert (after[0] - before[0], after[1] - before[1]) == (0, 2)
