"""`pagedkv generate` on hostile flags and long prompts (the real CLI binary, aidreams260K)."""
import json
import subprocess

import pytest


def _generate(cli, aidreams, *flags, n="12"):
    args = [str(cli), "generate", "--model", str(aidreams / "aidreams260K.bin"),
            "--tokenizer", str(aidreams / "tok512.bin"), "-n", n, *flags]
    return subprocess.run(args, capture_output=True, text=True)


@pytest.mark.parametrize("flags, message", [
    (["--temperature", "-1"], "-1 is not a number >= 0"),
    (["--temperature", "nan"], "nan is not a finite number"),
    (["--top-p", "0"], "0 is not a fraction in (0, 1]"),
    (["--top-p", "inf"], "inf is not a finite number"),
    (["-n", "-3"], "-3 is not a number >= 0"),
    (["--block-size", "0"], "0 is not a number > 0"),
    (["--threads", "5000"], "5000 is not a number in [0, 1024]"),
    (["--prompt-file", "/no/such/prompt.txt"], "cannot read --prompt-file /no/such/prompt.txt"),
])
def test_bad_flags_are_refused_with_what_is_allowed(cli, aidreams, flags, message):
    result = _generate(cli, aidreams, *flags)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


def test_tiny_temperature_is_greedy(cli, aidreams):
    greedy = _generate(cli, aidreams, "--prompt", "Once upon", "--print-ids")
    tiny = _generate(cli, aidreams, "--prompt", "Once upon", "--print-ids",
                     "--temperature", "1e-39", "--seed", "7")
    assert greedy.returncode == 0 and tiny.returncode == 0, tiny.stderr
    assert tiny.stdout == greedy.stdout


def test_prompt_file_matches_the_prompt_flag(cli, aidreams, tmp_path):
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Once upon")
    by_flag = _generate(cli, aidreams, "--prompt", "Once upon", "--print-ids")
    by_file = _generate(cli, aidreams, "--prompt-file", str(prompt), "--print-ids")
    assert by_file.returncode == 0, by_file.stderr
    assert by_file.stdout == by_flag.stdout


@pytest.mark.parametrize("k", [1, 3, 6])
def test_speculative_ngram_gives_the_same_greedy_ids(cli, aidreams, k):
    flags = ["--prompt", "Once upon a time", "--prompt", "Echoes of", "--print-ids"]
    plain = _generate(cli, aidreams, *flags, n="100")
    spec = _generate(cli, aidreams, *flags, "--speculative", f"ngram:{k}", "--stats", n="100")
    assert plain.returncode == 0 and spec.returncode == 0, spec.stderr
    ids = [line for line in plain.stdout.splitlines() if line.startswith("output ids")]
    assert len(ids) == 2
    assert [line for line in spec.stdout.splitlines() if line.startswith("output ids")] == ids
    line = next(line for line in spec.stdout.splitlines() if line.startswith("speculative"))
    assert f"speculative (ngram:{k}):" in line and "acceptance rate" in line, line


def test_speculative_json_reports_drafts_and_cached_tokens(cli, aidreams):
    result = _generate(cli, aidreams, "--prompt", "Once upon a time", "--prompt",
                       "Once upon a time", "--sequential", "--json", "--block-size", "4",
                       "--speculative", "ngram:4", n="60")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["draft_tokens"] > 0
    assert 0 < out["accepted_draft_tokens"] <= out["draft_tokens"]
    second = out["outputs"][1]
    cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached == second["prefix_cache_hit_tokens"] > 0
    assert second["tier_hit_tokens"] == {"device": cached, "host": 0, "disk": 0, "remote": 0}


@pytest.mark.parametrize("value", ["ngram", "ngram:0", "ngram:65", "eagle:3", "ngram:x"])
def test_bad_speculative_values_are_refused(cli, aidreams, value):
    result = _generate(cli, aidreams, "--speculative", value)
    assert result.returncode != 0
    assert "expected ngram:K with K in [1, 64]" in result.stderr, result.stderr


def test_json_counts_host_tier_loads_after_preemption_apart(cli, aidreams):
    # Eight prompts on a 36-block pool: requests are preempted; re-admitted, they load what the
    # host tier holds (prompt and generated blocks) instead of recomputing it.
    prompts = ["Once upon a time", "The little dog", "A girl named Lily", "In a small town",
               "One day, a boy", "The sun was", "Tom and Sue", "There was a big tree"]
    flags = [f for p in prompts for f in ("--prompt", p)] + ["--json", "--block-size", "4"]
    tiered = _generate(cli, aidreams, *flags, "--num-kv-blocks", "36", "--host-cache-blocks",
                       "4096", n="100")
    device = _generate(cli, aidreams, *flags, "--num-kv-blocks", "36", n="100")
    plain = _generate(cli, aidreams, *flags, "--no-prefix-caching", n="100")
    assert tiered.returncode == 0 and device.returncode == 0 and plain.returncode == 0
    t, d, p = (json.loads(r.stdout) for r in (tiered, device, plain))
    assert [o["output_ids"] for o in t["outputs"]] == [o["output_ids"] for o in p["outputs"]]
    assert t["preemptions"] > 0 and t["readmissions"] == t["preemptions"]
    hits = t["readmission_hit_tokens"]
    assert hits["host"] > 0 and hits["remote"] == 0
    assert hits["host"] == sum(o["readmission_hit_tokens"]["host"] for o in t["outputs"])
    assert sum(hits.values()) <= t["readmission_tokens"]
    # First admissions: only what the device pool already held (prompts sharing a first block).
    assert t["tier_hit_tokens"]["host"] == 0 and t["tier_hit_tokens"]["remote"] == 0
    assert d["readmission_hit_tokens"]["host"] == 0
    assert t["computed_tokens"] < d["computed_tokens"]
