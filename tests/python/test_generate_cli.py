"""`pagedkv generate` on hostile flags and long prompts (the real CLI binary, aidreams260K)."""
import subprocess

import pytest


def _generate(cli, aidreams, *flags):
    args = [str(cli), "generate", "--model", str(aidreams / "aidreams260K.bin"),
            "--tokenizer", str(aidreams / "tok512.bin"), "-n", "12", *flags]
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
