"""The ``pagedkv`` console script and ``python -m pagedkv``: run the C++ ``pagedkv`` program.

The program is found, in order, at ``pagedkv/bin/pagedkv`` inside the package (a wheel built by
``pip install .``), at ``<prefix>/bin/pagedkv`` beside a ``cmake --install`` of the package, and
at ``build/pagedkv`` beside a build tree's ``build/python/pagedkv``. The process becomes the
program (``os.execv``), so its output, signals and exit status are the program's own.
"""

import os
import pathlib
import sys
from typing import List, Optional

_PACKAGE = pathlib.Path(__file__).resolve().parent


def program_candidates() -> List[pathlib.Path]:
    """The places the program is looked for, in order (see the module's docstring)."""
    up = _PACKAGE.parents
    candidates = [_PACKAGE / "bin" / "pagedkv"]
    if len(up) > 3:  # <prefix>/lib/python3.X/site-packages/pagedkv
        candidates.append(up[3] / "bin" / "pagedkv")
    if len(up) > 1:  # build/python/pagedkv
        candidates.append(up[1] / "pagedkv")
    return candidates


def program_path() -> Optional[pathlib.Path]:
    """The first candidate that is an executable file, or None."""
    for path in program_candidates():
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


def main(argv: Optional[List[str]] = None) -> int:
    """Runs the program with ``argv`` (default: this process's arguments) in place of this
    process. Returns 2, after a message on stderr, when no program is found."""
    args = sys.argv[1:] if argv is None else list(argv)
    path = program_path()
    if path is None:
        tried = ", ".join(str(p) for p in program_candidates())
        sys.stderr.write(
            f"pagedkv: the pagedkv program is not installed (looked at {tried}); "
            "install the package with `pip install .` from a pagedkv checkout, or build it "
            "(bash scripts/build.sh) and run build/pagedkv\n"
        )
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(path, [str(path), *args])
    return 0  # not reached: execv replaces the process
