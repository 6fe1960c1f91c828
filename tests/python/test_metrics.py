"""`pagedkv generate --metrics-file` writes the KV cache's metrics in the Prometheus text format;
Debian's prometheus_client (python3-prometheus-client) parses it back."""
import subprocess

import pytest

def _families(path):
    from prometheus_client.parser import text_string_to_metric_families
    return {f.name: f for f in text_string_to_metric_families(path.read_text())}


def _generate(cli, aidreams, *flags):
    args = [str(cli), "generate", "--model", str(aidreams / "aidreams260K.bin"),
            "--tokenizer", str(aidreams / "tok512.bin"), *flags]
    return subprocess.run(args, capture_output=True, text=True)


def test_metrics_file_parses_with_prometheus_client(cli, aidreams, tmp_path):
    metrics = tmp_path / "metrics.prom"
    # Same prompt twice, one after another: the second hits; a small pool forces evictions.
    result = _generate(cli, aidreams, "--prompt", "Once upon a time there was",
                       "--prompt", "Once upon a time there was", "--prompt", "Echoes of vectors",
                       "--sequential", "-n", "40", "--block-size", "4", "--num-kv-blocks", "16",
                       "--metrics-file", str(metrics))
    assert result.returncode == 0, result.stderr
    families = _families(metrics)
    for name, kind in [("pagedkv_prefix_cache_lookups", "counter"),
                       ("pagedkv_prefix_cache_queries", "counter"),
                       ("pagedkv_prefix_cache_hits", "counter"),
                       ("pagedkv_prefix_cache_stored_blocks", "counter"),
                       ("pagedkv_prefix_cache_evicted_blocks", "counter"),
                       ("pagedkv_kv_cache_usage_ratio", "gauge"),
                       ("pagedkv_kv_block_lifetime_seconds", "histogram"),
                       ("pagedkv_kv_block_idle_before_evict_seconds", "histogram"),
                       ("pagedkv_kv_block_reuse_gap_seconds", "histogram")]:
        assert name in families, sorted(families)
        assert families[name].type == kind, name

    def value(family, sample):
        return next(s.value for s in families[family].samples if s.name == sample)

    assert value("pagedkv_prefix_cache_lookups", "pagedkv_prefix_cache_lookups_total") == 3
    assert value("pagedkv_prefix_cache_hits", "pagedkv_prefix_cache_hits_total") > 0
    assert value("pagedkv_prefix_cache_evicted_blocks",
                 "pagedkv_prefix_cache_evicted_blocks_total") > 0
    assert 0.0 <= value("pagedkv_kv_cache_usage_ratio", "pagedkv_kv_cache_usage_ratio") <= 1.0
    for hist in ["pagedkv_kv_block_lifetime_seconds", "pagedkv_kv_block_reuse_gap_seconds"]:
        samples = families[hist].samples
        buckets = [s for s in samples if s.name == hist + "_bucket"]
        counts = [s.value for s in buckets]
        assert counts == sorted(counts), "buckets are cumulative"
        assert buckets[-1].labels["le"] == "+Inf"
        assert counts[-1] == value(hist, hist + "_count") > 0


def test_unwritable_metrics_file_is_an_error(cli, aidreams, tmp_path):
    result = _generate(cli, aidreams, "-n", "4", "--metrics-file",
                       str(tmp_path / "no" / "such" / "dir" / "m.prom"))
    assert result.returncode != 0
    assert "cannot write --metrics-file" in result.stderr, result.stderr
