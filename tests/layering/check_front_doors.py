"""Fails when production code reaches into another component through a back door
(DESIGN.md, "Core and extensions": tiers and the chunk index attach through the manager's own
interface; no code outside cache/ reaches into the pool, and no component includes another's
*_internal.h). In the production folders (engine/, python/src/, kernels/, include/) a source
file must not
  * name `MutablePool` (KvCacheManagerInternal: tests and cache/
    only), nor
  * include a `*_internal.h` from another folder than its own (a folder is a component).
Each violation is printed as `path:line: what`; the exit status is 1 when there is any.

Usage: python3 tests/layering/check_front_doors.py [SOURCE_DIR]   (default: this checkout)
       python3 tests/layering/check_front_doors.py --self-test   (the checker catches both
                                                                    kinds, on a scratch tree)
"""

import pathlib
import re
import sys
import tempfile

PRODUCTION_DIRS = ("engine", "python/src", "kernels", "include")
SOURCE_SUFFIXES = {".h", ".hpp", ".cc", ".cpp", ".cu", ".cuh"}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"](?P<path>[^">]+_internal\.h)[">]')
MUTABLE_POOL = re.compile(r"\bMutablePool\b")


def violations(root: pathlib.Path):
    """(relative path, line number, message) of every back door under the production folders."""
    for top in PRODUCTION_DIRS:
        base = root / top
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
                continue
            rel = path.relative_to(root)
            own_dir = rel.parent.as_posix()
            text = path.read_text(encoding="utf-8", errors="replace")
            for number, line in enumerate(text.splitlines(), 1):
                if MUTABLE_POOL.search(line):
                    yield rel, number, (
                        "names MutablePool; attach through the manager instead "
                        "(KvCacheManager::AttachChunkIndex, TierChain::Create, AddEventListener)")
                m = INCLUDE.match(line)
                if m and pathlib.PurePosixPath(m["path"]).parent.as_posix() != own_dir:
                    yield rel, number, (
                        f'includes another component\'s internal header "{m["path"]}"')


def check(root: pathlib.Path) -> int:
    found = list(violations(root))
    for rel, number, message in found:
        print(f"{rel}:{number}: {message}")
    if found:
        print(f"{len(found)} back door(s) in production code; see DESIGN.md, "
              '"Core and extensions"', file=sys.stderr)
        return 1
    print(f"no back doors under {', '.join(PRODUCTION_DIRS)} of {root}")
    return 0


def self_test() -> int:
    """A scratch tree with one file of each kind of violation and one clean file."""
    files = {
        "engine/runtime/a.cc": '#include "engine/runtime/a_internal.h"\nint x;\n',  # own: fine
        "engine/runtime/a_internal.h": "int y;\n",
        "engine/tools/replay/b.cc": '#include "cache/kv_cache_manager_internal.h"\n',
        "kernels/c.cu": "auto& p = KvCacheManagerInternal::MutablePool(m);\n",
        "tests/cache/d.cc": "auto& p = KvCacheManagerInternal::MutablePool(m);\n",  # tests: fine
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        got = sorted((rel.as_posix(), number) for rel, number, _ in violations(root))
    want = [("engine/tools/replay/b.cc", 1), ("kernels/c.cu", 1)]
    if got != want:
        print(f"self-test: expected violations {want}, got {got}", file=sys.stderr)
        return 1
    print("self-test: the checker flags both kinds of back door and nothing else")
    return 0


def main(argv) -> int:
    if argv[1:] == ["--self-test"]:
        return self_test()
    root = pathlib.Path(argv[1]) if len(argv) > 1 else pathlib.Path(__file__).resolve().parents[2]
    return check(root)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
