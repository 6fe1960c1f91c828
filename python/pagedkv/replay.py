"""The replay tool (``pagedkv replay``) as functions, and its workload generators.

``run(**options)`` does what ``pagedkv replay --json`` does with the same options and returns
the JSON object it prints, as a dict. Options are ``pagedkv replay``'s flags in snake_case;
``default_config()`` lists them with their C++ defaults::

    import pagedkv
    r = pagedkv.replay.run(workload="conversation", requests=100, capacity_blocks=20000)
    r["block_hit_rate"], r["misses"]

``sweep(capacities, policies, **options)`` runs cache mode at every capacity for every policy
and returns the ``--sweep --json`` object (writing the CSV / plot only when ``csv=`` /
``plot=`` paths are given). ``run_cache(workload, capacity_blocks=...)`` replays a
:class:`Workload` built or edited in Python. Every replay releases the GIL while it runs.

Generators: ``generate(name, num_requests=0, seed=1)`` (``builtin_workload_names()``),
``system_prompt_workload(**options)``, ``conversation_workload(**options)``,
``rag_workload(**options)``, ``load_trace(path)``; ``materialize_prompt(request, vocab_size)``
gives a request's token ids.
"""

import json as _json
from typing import Any as _Any
from typing import Dict as _Dict
from typing import Optional as _Optional
from typing import Sequence as _Sequence

from ._pagedkv import replay as _replay
from ._pagedkv.replay import (  # noqa: F401  (re-exported)
    ChunkSpan,
    ReplayRequest,
    Segment,
    Workload,
    builtin_workload_names,
    conversation_workload,
    default_config,
    generate,
    load_trace,
    materialize_prompt,
    policy_names,
    rag_workload,
    system_prompt_workload,
)

__all__ = [
    "ChunkSpan",
    "ReplayRequest",
    "Segment",
    "Workload",
    "builtin_workload_names",
    "conversation_workload",
    "default_config",
    "generate",
    "load_trace",
    "materialize_prompt",
    "policy_names",
    "rag_workload",
    "run",
    "run_cache",
    "sweep",
    "system_prompt_workload",
]


def run(**options: _Any) -> _Dict[str, _Any]:
    """``pagedkv replay --json`` with ``options`` (see ``default_config()``): its JSON object.

    Raises :class:`pagedkv.InvalidArgumentError` for an unknown option or a bad value, and the
    error of the failing step otherwise (e.g. :class:`pagedkv.NotFoundError` for a missing
    trace)."""
    return _json.loads(_replay.run_json(options))


def sweep(
    capacities: _Sequence[int],
    policies: _Optional[_Sequence[str]] = None,
    **options: _Any,
) -> _Dict[str, _Any]:
    """Cache mode at each capacity (blocks) for each policy (default: all of
    ``policy_names()``), as ``pagedkv replay --sweep ... --json`` reports it: the workload's
    fields plus ``runs``, one dict per (capacity, policy) in that order. Files are written only
    for ``csv=`` / ``plot=`` paths."""
    return _json.loads(_replay.sweep_json(list(capacities), list(policies or []), options))


def run_cache(
    workload: Workload,
    *,
    capacity_blocks: int,
    policy: str = "lru",
    block_size: int = 16,
    count_shifted: bool = True,
    cache_partial_tail: bool = False,
) -> _Dict[str, _Any]:
    """One cache-mode replay of ``workload`` (fields as one run of ``pagedkv replay --json``).
    ``cache_partial_tail=True`` is the block model before issue 29 (``--cache-partial-tail``)."""
    return _json.loads(
        _replay.run_cache_json(
            workload,
            capacity_blocks=capacity_blocks,
            policy=policy,
            block_size=block_size,
            count_shifted=count_shifted,
            cache_partial_tail=cache_partial_tail,
        )
    )
