"""Runs the code blocks of README.md and docs/*.md that are marked runnable, and fails when one
breaks, so the documentation cannot rot.

A block is runnable when the line right above its opening fence is the HTML comment
`<!-- runnable -->` (invisible on the rendered page):

    <!-- runnable -->
    ```sh
    build/pagedkv replay --workload conversation --requests 50 --json
    ```

By the fence's language:
  sh, bash, shell  run with `bash -euo pipefail`;
  python           run with the Python the module was built for (PYTHONPATH: build/python);
  cpp, c++         compiled as one program against an install of the build (`cmake --install`
                   into a temporary prefix, then g++ with `pkg-config --cflags --libs pagedkv`,
                   as scripts/consumer_check.sh's pkg-config build does) and run.
Each block runs in a scratch copy of the checkout's layout: a temporary folder whose entries
link to the checkout's (so `scripts/...`, `tests/...` resolve and outputs such as out/ stay
there), with `build` linking to the build directory under test and `../shared` to the shared
data. Blocks run one by one, each within --timeout seconds; keep them to seconds.

Usage: run_doc_blocks.py --source-dir DIR --build-dir DIR [--python PY] [--shared-dir DIR]
                         [--timeout S] [--expect-fail] [FILE...]
(default files: README.md and docs/**/*.md). With --expect-fail every block must fail (the
runner's own test: tests/docs/broken_blocks.md).
"""

import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

MARKER = re.compile(r"^\s*<!--\s*runnable\s*-->\s*$")
FENCE_OPEN = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")
LANGS = {"sh": "sh", "bash": "sh", "shell": "sh", "python": "python", "py": "python",
         "cpp": "cpp", "c++": "cpp"}


def blocks_of(path: pathlib.Path):
    """(line of the fence, language, code) of every runnable block of `path`."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out = []
    i = 0
    while i < len(lines):
        m = FENCE_OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group(2), m.group(3).lower()
        start = i
        i += 1
        body = []
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        i += 1
        if start > 0 and MARKER.match(lines[start - 1]):
            if lang not in LANGS:
                raise SystemExit(f"{path}:{start + 1}: a runnable block needs a language of "
                                 f"{sorted(LANGS)}, got '{lang}'")
            out.append((start + 1, LANGS[lang], "\n".join(body) + "\n"))
    return out


class Runner:
    def __init__(self, args, scratch: pathlib.Path):
        self.args = args
        self.scratch = scratch
        self.checkout = scratch / "checkout"
        self.prefix = None
        self.checkout.mkdir()
        for entry in args.source_dir.iterdir():
            if entry.name not in ("build", ".git", "out"):
                (self.checkout / entry.name).symlink_to(entry)
        (self.checkout / "build").symlink_to(args.build_dir)
        if args.shared_dir is not None and args.shared_dir.exists():
            (scratch / "shared").symlink_to(args.shared_dir)
        self.env = dict(os.environ)
        self.env["PATH"] = f"{args.build_dir}:{self.env.get('PATH', '')}"
        self.env["PYTHONPATH"] = os.pathsep.join(
            [str(args.build_dir / "python")] + [p for p in [os.environ.get("PYTHONPATH")] if p])

    def run(self, cmd, timeout):
        return subprocess.run(cmd, cwd=self.checkout, env=self.env, capture_output=True,
                              text=True, timeout=timeout)

    def install(self):
        """The build installed into a temporary prefix, once (for C++ blocks)."""
        if self.prefix is None:
            self.prefix = self.scratch / "prefix"
            r = subprocess.run(["cmake", "--install", str(self.args.build_dir), "--prefix",
                                str(self.prefix)], capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit(f"cmake --install failed:\n{r.stdout}{r.stderr}")
        return self.prefix

    def run_block(self, lang, code, name):
        timeout = self.args.timeout
        if lang == "sh":
            return self.run(["bash", "-euo", "pipefail", "-c", code], timeout)
        if lang == "python":
            return self.run([self.args.python, "-c", code], timeout)
        prefix = self.install()
        source = self.scratch / f"{name}.cc"
        binary = self.scratch / name
        source.write_text(code)
        env = dict(self.env, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "pagedkv"], env=env,
                               capture_output=True, text=True, check=True).stdout.split()
        cxx = os.environ.get("CXX", "g++")
        built = subprocess.run([cxx, "-std=c++20", "-O1", "-o", str(binary), str(source)] + flags,
                               capture_output=True, text=True, timeout=timeout)
        if built.returncode != 0:
            return built
        return self.run([str(binary)], timeout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source-dir", type=pathlib.Path, required=True)
    parser.add_argument("--build-dir", type=pathlib.Path, required=True)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--shared-dir", type=pathlib.Path, default=None)
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--expect-fail", action="store_true")
    parser.add_argument("files", nargs="*", type=pathlib.Path)
    args = parser.parse_args()
    args.source_dir = args.source_dir.resolve()
    args.build_dir = args.build_dir.resolve()
    if args.shared_dir is None:
        args.shared_dir = args.source_dir.parent / "shared"
    files = args.files or [args.source_dir / "README.md"] + sorted(
        (args.source_dir / "docs").glob("**/*.md"))
    found = [(f, line, lang, code) for f in files for line, lang, code in blocks_of(f)]
    if not found:
        print("run_doc_blocks: no runnable block found; mark some with <!-- runnable -->")
        return 1
    failures = 0
    with tempfile.TemporaryDirectory(prefix="pagedkv-docs-") as tmp:
        runner = Runner(args, pathlib.Path(tmp))
        for k, (f, line, lang, code) in enumerate(found):
            where = f"{f.resolve().relative_to(args.source_dir)}:{line}"
            start = time.monotonic()
            try:
                r = runner.run_block(lang, code, f"block{k}")
                ok, output = r.returncode == 0, r.stdout + r.stderr
            except subprocess.TimeoutExpired:
                ok, output = False, f"timed out after {args.timeout} s"
            seconds = time.monotonic() - start
            if ok == args.expect_fail:
                failures += 1
                want = "fail" if args.expect_fail else "pass"
                print(f"FAIL {where} ({lang}, {seconds:.1f} s): expected it to {want}\n"
                      f"--- block ---\n{code}--- output ---\n{output[-4000:]}")
            else:
                print(f"ok   {where} ({lang}, {seconds:.1f} s)")
    print(f"run_doc_blocks: {len(found)} blocks, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
