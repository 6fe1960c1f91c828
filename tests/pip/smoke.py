"""What scripts/pip_check.sh runs with the interpreter of a fresh virtual environment in which
`pip install .` installed pagedkv: the installed package (not a source tree) imports, a prefix
lookup hits, a replay runs, and the `pagedkv` command and `python -m pagedkv` work.
Exits non-zero (an AssertionError or a failed command) when any of that breaks."""

import importlib.metadata
import os
import pathlib
import subprocess
import sys

import pagedkv

package = pathlib.Path(pagedkv.__file__).resolve().parent
prefix = pathlib.Path(sys.prefix).resolve()
assert prefix in package.parents, f"imported {package}, not the package installed in {prefix}"
for name in ("_pagedkv.pyi", "replay.pyi", "py.typed", "bin/pagedkv"):
    assert (package / name).is_file(), f"the installed package lacks {name}"

version = importlib.metadata.version("pagedkv")
assert pagedkv.__version__ == version, (pagedkv.__version__, version)

# A prefix lookup: the second request finds the first one's two full blocks.
m = pagedkv.KvCacheManager(num_blocks=16, block_size=4, model_fingerprint="pip-check")
first = m.new_request(1, list(range(10)))
hit = m.get_computed_blocks(first)
m.allocate_slots(first, first.num_tokens - hit.num_computed_tokens, hit)
m.free(1)
second = m.new_request(2, list(range(9)) + [99])
assert m.get_computed_blocks(second).num_computed_tokens == 8

# A replay through the package's Python wrapper.
report = pagedkv.replay.run(workload="conversation", requests=20, capacity_blocks=4000)
assert report["requests"] > 0 and 0.0 <= report["block_hit_rate"] <= 1.0, report

# The console script and `python -m pagedkv`.
bin_dir = pathlib.Path(sys.executable).parent
help_text = subprocess.run([str(bin_dir / "pagedkv"), "--help"], check=True,
                           capture_output=True, text=True).stdout
for command in ("generate", "serve", "replay", "study-shift", "kv-events"):
    assert command in help_text, f"`pagedkv --help` does not list {command}"
shown = subprocess.run([sys.executable, "-m", "pagedkv", "--version"], check=True,
                       capture_output=True, text=True).stdout.strip()
assert shown == version, (shown, version)
print(f"pip smoke: pagedkv {version} from {package} (python {sys.version.split()[0]}, "
      f"pid {os.getpid()}): import, lookup, replay, pagedkv --help, python -m pagedkv --version")
