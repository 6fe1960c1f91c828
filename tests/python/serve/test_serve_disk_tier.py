"""`pagedkv serve --disk-cache DIR`: KV that survives a restart and is shared by two servers on one
machine. A server stores a long prompt's blocks on disk; after SIGTERM a new server on the same
folder answers the same request with cached_tokens from the disk tier and the same text, and
/metrics (read by Prometheus's own parser) counts the disk tier's hits."""

from __future__ import annotations

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
    restarted = Server(cli_module, args)
    try:
        warm = _complete(restarted)
        cached = warm["usage"]["prompt_tokens_details"]["cached_tokens"]
        assert cached >= 144 and cached % 16 == 0
        assert warm["choices"][0]["text"] == cold["choices"][0]["text"]
        tiers = _tier_samples(restarted)
        assert tiers[("pagedkv_tier_hit_blocks_total", "disk")] == cached // 16
        assert tiers[("pagedkv_tier_faults_total", "disk")] == 0
        assert tiers[("pagedkv_tier_resident_bytes", "disk")] > 0
    finally:
        assert restarted.stop() == 0
