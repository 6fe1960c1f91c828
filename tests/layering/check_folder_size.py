#!/usr/bin/env python3
# Copyright 2026 The pagedkv Authors.
"""No folder of the source tree holds more than 25 source files (issue 40: the layout shows the
architecture; a folder that grows past the limit is split by job, see docs/architecture.md's
folder table).

Counts files ending in .h .cc .cu .cuh .inc .py directly in each folder, outside build folders
(build*/), out/, hidden folders and __pycache__. Exit status 1, naming every folder over the limit
and its count, when there is any.

Usage: python3 tests/layering/check_folder_size.py [SOURCE_DIR]   (default: this checkout)
       python3 tests/layering/check_folder_size.py --self-test    (the checker on a scratch tree)
"""
import os
import sys
import tempfile

LIMIT = 25
SOURCE_SUFFIXES = (".h", ".cc", ".cu", ".cuh", ".inc", ".py")


def skipped(name: str) -> bool:
    """True for a folder name the count ignores (build outputs, caches, hidden folders)."""
    return name.startswith(("build", ".")) or name in ("out", "__pycache__")


def oversized(root: str) -> list[tuple[str, int]]:
    """(repo-relative folder, source files) of every folder over LIMIT, sorted."""
    found = []
    for folder, dirs, files in os.walk(root):
        at_top = os.path.samefile(folder, root)
        dirs[:] = [d for d in dirs if not (skipped(d) if at_top else d.startswith("."))]
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        count = sum(1 for f in files if f.endswith(SOURCE_SUFFIXES))
        if count > LIMIT:
            found.append((os.path.relpath(folder, root), count))
    return sorted(found)


def self_test() -> int:
    """Checks the checker on a scratch tree: one folder over the limit, one at it, one skipped."""
    with tempfile.TemporaryDirectory() as root:
        for folder, n in (("big", LIMIT + 1), ("ok", LIMIT), ("build/x", LIMIT + 5)):
            os.makedirs(os.path.join(root, folder))
            for i in range(n):
                open(os.path.join(root, folder, f"f{i}.cc"), "w").close()
        open(os.path.join(root, "ok", "notes.md"), "w").close()
        got = oversized(root)
    if got != [("big", LIMIT + 1)]:
        print(f"self-test failed: {got}")
        return 1
    print("self-test: the checker flags only the folder over the limit")
    return 0


def main(argv: list[str]) -> int:
    if argv[1:] == ["--self-test"]:
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    over = oversized(root)
    for folder, count in over:
        print(f"{folder}/ holds {count} source files (limit {LIMIT}): split it by job and add its "
              "line to docs/architecture.md's folder table")
    if not over:
        print(f"no folder over {LIMIT} source files in {os.path.abspath(root)}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
