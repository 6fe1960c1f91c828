"""`pagedkv serve --kv-cache-dtype int8`: the server answers from quantized KV pages and says so in
/metrics (vLLM's cache_config_info with its cache_dtype label, bytes per token, capacity)."""

from __future__ import annotations

import re

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
        assert re.search(r'^pagedkv_cache_config_info\{cache_dtype="int8",block_size="16",'
                         r'num_blocks="\d+"\} 1$', text, re.M), text
        samples = server.metrics()
        # 4 layers x (K, V) x 4 KV heads x (16 int8 values + a 2-byte scale)
        assert samples["pagedkv_kv_cache_bytes_per_token"] == 4 * 2 * 4 * 18
        assert samples["pagedkv_kv_cache_capacity_tokens"] >= (1 << 20) // (4 * 2 * 4 * 18) - 16
    finally:
        assert server.stop() == 0
