"""aidreams260K through `pagedkv generate` beside llama2.c's `run.c` (issue 39's targets), whole
processes, wall time:
  - one generation of 127 positions (run.c `-n 127`; pagedkv `-n` 127 less the prompt's tokens);
  - 32 prompts x 100 new tokens: one `pagedkv generate` with 32 `--prompt`s against 32 run.c
    processes one after another (and, for reference, two at a time on the 2 cores).
RUNC is a run.c binary built by hand (`gcc -O3 -march=native run.c -lm`, from
github.com/karpathy/llama2.c; not part of the tree). Runs on /usr/bin/python3 with nothing
installed:

    /usr/bin/python3 bench/engine/model/vs_runc.py --runc /path/to/run [--pagedkv build/pagedkv]
"""
import argparse
import concurrent.futures
import os
import statistics
import subprocess
import time

DATA = os.path.join(os.path.dirname(__file__), "../../../../shared/data/aidreams260K")


def wall(cmds, parallel=1):
    """Seconds to run every command (lists of argv), `parallel` at a time."""
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(parallel) as pool:
        for done in pool.map(lambda c: subprocess.run(c, capture_output=True), cmds):
            done.check_returncode()
    return time.perf_counter() - start


def mean_ms(fn, repeats):
    fn()  # warm the page cache
    return statistics.mean(fn() for _ in range(repeats)) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runc", required=True)
    ap.add_argument("--pagedkv", default="build/pagedkv")
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--repeats", type=int, default=10)
    a = ap.parse_args()
    model = os.path.join(a.data, "aidreams260K.bin")
    tok = os.path.join(a.data, "tok512.bin")
    runc = lambda prompt, n: [a.runc, model, "-z", tok, "-t", "0", "-n", str(n), "-i", prompt]
    pk = [a.pagedkv, "generate", "--model", model, "--tokenizer", tok]
    def prompt_tokens(prompt):  # BOS included, as run.c counts its positions
        out = subprocess.run(pk + ["--prompt", prompt, "-n", "1", "--print-ids"],
                             capture_output=True, text=True, check=True).stdout
        return len(next(l for l in out.splitlines() if l.startswith("prompt ids:")).split()) - 2

    one = "Once upon a time"
    single_runc = mean_ms(lambda: wall([runc(one, 127)]), a.repeats)
    new_tokens = str(127 - prompt_tokens(one))
    single_pk = mean_ms(lambda: wall([pk + ["--prompt", one, "-n", new_tokens]]), a.repeats)
    prompts = [f"Story {i}: once upon a time" for i in range(1, 33)]
    positions = [prompt_tokens(p) + 100 for p in prompts]
    batch_pk_args = pk + [x for p in prompts for x in ("--prompt", p)] + ["-n", "100"]
    batch_pk = mean_ms(lambda: wall([batch_pk_args]), a.repeats)
    runs = [runc(p, n) for p, n in zip(prompts, positions)]
    batch_runc = mean_ms(lambda: wall(runs), max(2, a.repeats // 3))
    batch_runc2 = mean_ms(lambda: wall(runs, 2), max(2, a.repeats // 3))
    print(f"load {os.getloadavg()[0]:.2f}")
    print("| run | run.c (ms) | pagedkv (ms) | pagedkv speed-up |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| one 127-position generation | {single_runc:.1f} | {single_pk:.1f} | "
          f"{single_runc / single_pk:.2f}x |")
    print(f"| 32 prompts x 100 tokens, run.c one at a time | {batch_runc:.0f} | {batch_pk:.0f} | "
          f"{batch_runc / batch_pk:.1f}x |")
    print(f"| the same, run.c two at a time | {batch_runc2:.0f} | {batch_pk:.0f} | "
          f"{batch_runc2 / batch_pk:.1f}x |")


if __name__ == "__main__":
    main()
