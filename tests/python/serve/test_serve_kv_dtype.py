"""`pagedkv serve --kv-cache-dtype int8`: the server answers from quantized KV pages and says so in
/metrics (vLLM's cache_config_info with its cache_dtype label, bytes per token, capacity)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families
from serve_util import Server


def test_quantized_kv_server_answers_and_reports_its_pool(cli_module, aidreams_args):
    server = Server(cli_module, [*aidreams_args, "--kv-cache-dtype", "int8",
                                 "--kv-cache-memory", "1M"])
    try:
        status, _, body = server.request("POST", "/v1/completions",
                                         {"prompt": "Echoes of", "max_tokens": 8,
                                          "temperature": 0})
        assert status == 200, body
        assert body["usage"]["completion_tokens"] == 8
        status, _, text = server.request("GET", "/metrics")
        assert status == 200
        # Read by Prometheus's own parser (Debian's python3-prometheus-client), as a scraper would.
        samples = {s.name: s for family in text_string_to_metric_families(text)
                   for s in family.samples}
        info = samples["pagedkv_cache_config_info"]
        assert info.value == 1 and info.labels["cache_dtype"] == "int8"
        assert info.labels["block_size"] == "16" and int(info.labels["num_blocks"]) > 0
        # 4 layers x (K, V) x 4 KV heads x (16 int8 values + a 2-byte scale)
        bytes_per_token = 4 * 2 * 4 * 18
        assert samples["pagedkv_kv_cache_bytes_per_token"].value == bytes_per_token
        assert samples["pagedkv_kv_cache_capacity_tokens"].value >= (1 << 20) // bytes_per_token - 16
    finally:
        assert server.stop() == 0
