"""pagedkv: a paged KV cache with prefix caching, a continuous-batching scheduler, the replay
tool and a small llama2.c engine, from Python.

The classes are the C++ library's (``pagedkv._pagedkv``, built with pybind11): snake_case
methods, keyword arguments with the C++ defaults, properties, and exceptions of the
:class:`Error` hierarchy for every failed call (nothing changes on error, as in C++).

Example::

    import pagedkv
    m = pagedkv.KvCacheManager(num_blocks=64, block_size=16, model_fingerprint="demo")
    r = m.new_request(1, list(range(40)))
    hit = m.get_computed_blocks(r)
    m.allocate_slots(r, r.num_tokens - hit.num_computed_tokens, hit)
    m.block_table(1)          # numpy int32, 3 blocks
    m.free(1)
"""

# Only pagedkv's own names are public: the modules and typing names used below are imported
# under private names, and __all__ lists the public ones (tests/python/test_public_api.py keeps
# it, the docstrings and the stubs in step).
import contextlib as _contextlib
import importlib as _importlib
import warnings as _warnings
from typing import Iterator as _Iterator
from typing import Optional as _Optional
from typing import Sequence as _Sequence

import numpy as _numpy

from . import _pagedkv


def _check_numpy(numpy_version: str, pybind11_version: tuple) -> None:
    """ImportError when the module's pybind11 cannot hand arrays to this NumPy: pybind11 before
    2.12 (Debian 12 has 2.10) speaks NumPy 1's C API only, and under NumPy 2 its arrays come back
    with wrong strides (every element reads as the first)."""
    if int(numpy_version.split(".")[0]) >= 2 and tuple(pybind11_version) < (2, 12):
        raise ImportError(
            f"pagedkv was built with pybind11 {'.'.join(map(str, pybind11_version))}, which "
            f"supports NumPy 1 only, but NumPy {numpy_version} was imported: install "
            "'numpy<2' (Debian 12's python3-numpy is 1.24) or rebuild pagedkv with pybind11 >= 2.12")


_check_numpy(_numpy.__version__, _pagedkv._pybind11_version)

from ._pagedkv import *  # noqa: E402,F401,F403  (the bound classes and functions)
from ._pagedkv import (  # noqa: E402,F401  (names used below)
    ChunkIndex,
    ChunkLocation,
    Engine,
    GenerationRequest,
    KvCacheManager,
    TokenOutput,
)

__all__ = [
    "AbortedError",
    "AllBlocksCleared",
    "AllocationPlan",
    "AlreadyExistsError",
    "BlockCopy",
    "BlockPool",
    "BlockRemoved",
    "BlockStored",
    "CacheRequest",
    "CacheStats",
    "CancelledError",
    "ChunkIndex",
    "ChunkIndexStats",
    "ChunkLocation",
    "ChunkReuseOptions",
    "ComputedBlocks",
    "DataLossError",
    "DeadlineExceededError",
    "Engine",
    "EngineStats",
    "Error",
    "EvictionPolicy",
    "FailedPreconditionError",
    "GenerationRequest",
    "GenerationResult",
    "GgufFile",
    "HybridKvCacheManager",
    "InternalError",
    "InvalidArgumentError",
    "KvCacheGroupSpec",
    "KvCacheManager",
    "KvSlotMove",
    "MultimodalInput",
    "NotFoundError",
    "OutOfRangeError",
    "PermissionDeniedError",
    "RequestInfo",
    "RequestOutput",
    "ResourceExhaustedError",
    "ScheduledBatch",
    "ScheduledSequence",
    "Scheduler",
    "SchedulerStats",
    "SchedulerStepStats",
    "StepOutput",
    "TokenOutput",
    "Tokenizer",
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
    "UnknownError",
    "chunk_key",
    "eviction_policy_names",
    "format_chat_prompt",
    "hash_block",
    "hash_from_u64",
    "read_chat_template",
    "replay",
    "root_hash",
]

#: The package's version: the C++ library's (CMakeLists.txt's project version).
__version__: str = _pagedkv.__version__


class EvictionPolicy:
    """Base class of eviction policies written in Python; pass an instance as
    ``eviction_policy=`` to :class:`BlockPool` or :class:`KvCacheManager`.

    The pool calls the methods below from the thread that drives it (see the C++
    ``EvictionPolicy``): ``on_insert`` when a block enters the hash index (it is in use),
    ``on_access`` when a cached block is pinned (no longer a candidate), ``on_release`` when its
    reference count drops to zero (now a candidate), ``on_remove`` when it leaves the index
    otherwise, ``pick_victim`` to choose, forget and return a candidate, ``clear`` when the index
    is dropped. Hashes are 16-byte ``bytes``. An exception in a notification is reported through
    ``sys.unraisablehook``; an exception in ``pick_victim``, or a block that is not an evictable
    cached one, makes the allocation fail with :class:`InternalError` (the pool stays
    consistent).
    """

    #: The name the pool reports (``BlockPool.policy_name``).
    name: str = "python"

    def init(self, num_blocks: int) -> None:
        """Called once before any other call (and again by a new pool: start empty)."""

    def on_insert(self, block: int, hash: bytes) -> None:
        """``block`` entered the index under ``hash``; it is referenced (not a candidate)."""

    def on_access(self, block: int, hash: bytes) -> None:
        """Cached ``block`` was pinned; if it was a candidate it no longer is."""

    def on_release(self, block: int, hash: bytes) -> None:
        """Cached ``block``'s reference count dropped to zero: it is now a candidate."""

    def on_remove(self, block: int, hash: bytes) -> None:
        """``block`` left the index without being picked; forget it."""

    def pick_victim(self) -> int:
        """Choose a candidate, forget it and return its block id."""
        raise NotImplementedError("an EvictionPolicy subclass must implement pick_victim")

    def clear(self) -> None:
        """Forget every block."""


@_contextlib.contextmanager
def _chunk_pinned(self: ChunkIndex, location: ChunkLocation) -> _Iterator[ChunkLocation]:
    """``with index.pinned(location):`` acquires the chunk's blocks and releases them after."""
    self.acquire(location)
    try:
        yield location
    finally:
        self.release(location)


ChunkIndex.pinned = _chunk_pinned  # type: ignore[attr-defined]


def _engine_stream(
    self: Engine, requests: _Optional[_Sequence[GenerationRequest]] = None
) -> _Iterator[TokenOutput]:
    """Yields every token as it is sampled, step by step, until the engine has no unfinished
    request (``requests``, when given, are queued first)."""
    for request in requests or ():
        self.add_request(request)
    while self.has_unfinished_requests():
        for token in self.step().tokens:
            yield token


Engine.stream = _engine_stream  # type: ignore[attr-defined]

class HybridKvCacheManager(KvCacheManager):
    """Deprecated since issue #40 (one release): ``KvCacheManager(groups=[...])`` is the same
    manager, with every feature of a one-group manager. This alias keeps the old constructor
    (keyword arguments, ``groups`` required, no Python event recording) and
    ``num_blocks_to_allocate`` returning the per-group plan (``plan_allocation``). Its
    ``get_computed_blocks`` returns a ComputedBlocks: ``blocks`` is group 0's list now and
    ``group_blocks`` holds every group's (the old ``blocks``)."""

    def __init__(self, *, num_blocks, block_size=16, groups, enable_prefix_caching=True,
                 eviction_policy="lru", vocab_size=0, model_fingerprint="",
                 collect_event_batches=False, data_parallel_rank=None):
        _warnings.warn("pagedkv.HybridKvCacheManager is deprecated: use "
                       "pagedkv.KvCacheManager(groups=...)", DeprecationWarning, stacklevel=2)
        super().__init__(num_blocks=num_blocks, block_size=block_size, groups=groups,
                         enable_prefix_caching=enable_prefix_caching,
                         eviction_policy=eviction_policy, vocab_size=vocab_size,
                         model_fingerprint=model_fingerprint, record_events=False,
                         collect_event_batches=collect_event_batches,
                         data_parallel_rank=data_parallel_rank)

    def num_blocks_to_allocate(self, request, num_new_tokens, computed=None):
        """Deprecated: plan_allocation (what allocate_slots would take and release, per group)."""
        return self.plan_allocation(request, num_new_tokens, computed)


# The star import above bound `replay` to the extension's submodule; the package's replay.py
# (which wraps it) takes its place.
replay = _importlib.import_module(".replay", __name__)
