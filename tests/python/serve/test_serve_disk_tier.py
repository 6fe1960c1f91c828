"""`pagedkv serve --disk-cache DIR`: KV that survives a restart and is shared by two servers on one
machine. A server stores a long prompt's blocks on disk; after SIGTERM a new server on the same
folder answers the same request with cached_tokens from the disk tier and the same text, and
/metrics (read by Prometheus's own parser) counts the disk tier's hits."""

from __future__ import annotations

import subprocess

from prometheus_client.parser import text_string_to_metric_families
from serve_util import Server

STORY = ("Once upon a time, there was a little girl named Lily. She loved to play outside in the "
         "park with her friends. One day, she saw a big red ball under a tree. She ran to the ball "
         "and picked it up. Her mom said it was time to go home, so Lily put the ball in her bag. "
         "At home, she showed the ball to her dog, Max. Max wagged his tail and barked. ")


def _complete(server: Server) -> dict:
    status, _, body = server.request("POST", "/v1/completions",
                                     {"prompt": STORY * 3, "max_tokens": 12, "temperature": 0})
    assert status == 200, body
    return body


def _shared_prefix(server: Server, a: str, b: str) -> int:
    """How many leading token ids the prompts a and b share (the server's /tokenize)."""
    ids = []
    for prompt in (a, b):
        status, _, body = server.request("POST", "/tokenize", {"prompt": prompt})
        assert status == 200, body
        ids.append(body["tokens"])
    n = 0
    while n < min(map(len, ids)) and ids[0][n] == ids[1][n]:
        n += 1
    return n


def _tier_samples(server: Server) -> dict[tuple[str, str], float]:
    status, _, text = server.request("GET", "/metrics")
    assert status == 200
    return {(s.name, s.labels.get("tier", "")): s.value
            for family in text_string_to_metric_families(text) for s in family.samples
            if s.name.startswith("pagedkv_tier_")}


def test_a_restarted_server_answers_from_the_disk_tier(cli_module, tinystories_args, tmp_path):
    args = [*tinystories_args, "--disk-cache", str(tmp_path / "kv"), "--disk-cache-size", "256M"]
    first = Server(cli_module, args)
    try:
        cold = _complete(first)
        assert cold["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
        assert cold["usage"]["prompt_tokens"] > 150
        # A second server on the same folder while the first runs: the machine's servers share.
        second = Server(cli_module, args)
        try:
            shared = _complete(second)
            assert shared["usage"]["prompt_tokens_details"]["cached_tokens"] >= 144
            assert shared["choices"][0]["text"] == cold["choices"][0]["text"]
        finally:
            assert second.stop() == 0
    finally:
        assert first.stop() == 0
    restarted = Server(cli_module, [*args, "--disk-cache-read-threads", "3"])  # 3 values at once
    try:
        warm = _complete(restarted)
        cached = warm["usage"]["prompt_tokens_details"]["cached_tokens"]
        assert cached >= 144 and cached % 16 == 0
        assert warm["choices"][0]["text"] == cold["choices"][0]["text"]
        tiers = _tier_samples(restarted)
        assert tiers[("pagedkv_tier_hit_blocks_total", "disk")] == cached // 16
        assert tiers[("pagedkv_tier_faults_total", "disk")] == 0
        assert tiers[("pagedkv_tier_resident_bytes", "disk")] > 0
        # The folder's bytes, every process's: known once the writer has held the usage file.
        assert tiers[("pagedkv_tier_shared_resident_bytes", "disk")] >= -1
    finally:
        assert restarted.stop() == 0


def test_a_bad_read_thread_count_names_the_flag(cli_module, tinystories_args, tmp_path):
    run = subprocess.run([str(cli_module), "serve", "--port", "0", *tinystories_args, "--disk-cache",
                          str(tmp_path / "kv"), "--disk-cache-read-threads", "0"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode != 0
    assert "--disk-cache-read-threads must be in [1, 64], got 0" in run.stderr
    assert not (tmp_path / "kv").exists()  # nothing made


# A prompt that leaves the saved one after two of its three parts.
OTHER = STORY * 2 + "Then a big storm came, and everyone ran inside to hide under the warm blankets."


def test_a_named_save_survives_eviction_and_a_restart(cli_module, tinystories_args, tmp_path):
    """POST /v1/cache/save pins a prompt's blocks (llama.cpp's slot save): with every unpinned
    file removed (as eviction would) and the server restarted, a request naming the save gets
    them from disk, and one whose prompt leaves the saved one part way gets the full blocks they
    share (llama.cpp's restored slot serves the common prefix likewise), with a cold server's
    text; an unknown name is a 404, a server without a disk tier answers 400."""
    folder = tmp_path / "kv"
    args = [*tinystories_args, "--block-size", "16", "--disk-cache", str(folder),
            "--disk-cache-size", "256M"]
    server = Server(cli_module, args)
    try:
        status, _, saved = server.request("POST", "/v1/cache/save",
                                          {"name": "story", "prompt": STORY * 3})
        assert status == 200, saved
        assert saved["name"] == "story" and saved["saved_tokens"] >= 144
        assert saved["saved_tokens"] <= saved["prompt_tokens"]
        cold = _complete(server)
        status, _, body = server.request("POST", "/v1/completions",
                                         {"prompt": "x", "max_tokens": 1, "cache_name": "nope"})
        assert status == 404 and "nope" in body["error"]["message"]
        status, _, body = server.request("POST", "/v1/cache/save", {"prompt": "x"})
        assert status == 400 and body["error"]["param"] == "name"
    finally:
        assert server.stop() == 0
    for model in folder.iterdir():  # every block file but the save's links, as eviction would
        for shard in model.iterdir():
            if shard.is_dir() and shard.name != "names":  # not the folder's usage file
                for f in shard.iterdir():
                    f.unlink()
    restarted = Server(cli_module, args)
    try:
        status, _, warm = restarted.request("POST", "/v1/completions",
                                            {"prompt": STORY * 3, "max_tokens": 12,
                                             "temperature": 0, "cache_name": "story"})
        assert status == 200, warm
        assert warm["usage"]["prompt_tokens_details"]["cached_tokens"] == saved["saved_tokens"]
        assert warm["choices"][0]["text"] == cold["choices"][0]["text"]
        shared = _shared_prefix(restarted, STORY * 3, OTHER)
        status, _, partial = restarted.request("POST", "/v1/completions",
                                               {"prompt": OTHER, "max_tokens": 12,
                                                "temperature": 0, "cache_name": "story"})
        assert status == 200, partial
        cached = partial["usage"]["prompt_tokens_details"]["cached_tokens"]
        assert cached == min(shared // 16 * 16, saved["saved_tokens"])
        assert 0 < cached < saved["saved_tokens"], (cached, shared)
    finally:
        assert restarted.stop() == 0
    plain = Server(cli_module, tinystories_args)
    try:
        status, _, fresh = plain.request("POST", "/v1/completions",
                                         {"prompt": OTHER, "max_tokens": 12, "temperature": 0})
        assert status == 200, fresh
        assert fresh["choices"][0]["text"] == partial["choices"][0]["text"]
        status, _, body = plain.request("POST", "/v1/cache/save", {"name": "s", "prompt": "x y"})
        assert status == 400 and "--disk-cache" in body["error"]["message"]
    finally:
        assert plain.stop() == 0
