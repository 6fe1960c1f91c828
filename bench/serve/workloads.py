"""Workload construction for the serve load client: pure functions, no I/O except reading a trace.

A workload is a list of `Session`s. A session is a list of `Request`s sent one after another (a
turn starts when the previous one has finished); the session starts at its `arrival_s` when the
arrival mode is "trace" or "rate", or when a worker is free when it is "concurrency".
Single-request workloads (shared-prefix, mooncake) have one request per session.

Prompts are lists of token ids (exact length on every server) or strings (`--text`).
Token ids are drawn from [min_id, vocab) by `random.Random` seeded with a string, which Python
hashes with SHA-512, so a workload is the same on every run, machine and Python version.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import pathlib
import random
from typing import Sequence, Union

Prompt = Union[list[int], str]

# Common English words, each about one token in most BPE vocabularies (with its leading space).
_WORDS = (
    "the of and to in is was that for on it with as his he by at from this be had not are but "
    "which have or were one all their an they has been more who also its first new after two "
    "other time would some can when into there only years her most may over city people such "
    "many made used these world them any between where then during both through later being "
    "well before under about part state three while since first known school game family name "
    "water house light river music story small great home number north south east west river "
    "black white green red blue open early large local power point place world field level "
    "line market model order paper party plan press price rate road rule side sign site song "
    "space staff stage study table team term test text value view voice week word work year"
).split()


@dataclasses.dataclass
class Request:
    """One completion request of a workload."""

    prompt: Prompt  # token ids or text
    max_tokens: int  # output tokens asked for (fixed when ignore_eos is on)
    session: int = 0  # index of its session
    turn: int = 0  # index within its session
    hash_ids: tuple[int, ...] = ()  # mooncake only: the trace's block hashes

    @property
    def prompt_len(self) -> int:
        """Token count for id prompts; word count for text prompts."""
        return len(self.prompt) if isinstance(self.prompt, list) else len(self.prompt.split())


@dataclasses.dataclass
class Session:
    """Requests sent in order; the first at `arrival_s` (seconds from the start) in timed modes."""

    requests: list[Request]
    arrival_s: float = 0.0


@dataclasses.dataclass
class TokenSpace:
    """Where pseudo-random token ids come from."""

    vocab: int = 32000  # ids are < vocab; set to the model's vocabulary size or less
    min_id: int = 100  # ids are >= min_id, keeping clear of special tokens at the bottom
    seed: int = 0


def random_ids(space: TokenSpace, key: str, n: int) -> list[int]:
    """`n` ids in [min_id, vocab), a pure function of (space.seed, key, n)."""
    if space.vocab <= space.min_id:
        raise ValueError(f"--vocab ({space.vocab}) must exceed --min-id ({space.min_id})")
    rng = random.Random(f"pagedkv-serve:{space.seed}:{key}")
    return [rng.randrange(space.min_id, space.vocab) for _ in range(n)]


def random_text(seed: int, key: str, n: int) -> str:
    """`n` words (roughly `n` tokens), a pure function of (seed, key, n)."""
    rng = random.Random(f"pagedkv-serve-text:{seed}:{key}")
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def _part(space: TokenSpace, text: bool, key: str, n: int) -> Prompt:
    return random_text(space.seed, key, n) if text else random_ids(space, key, n)


def _join(a: Prompt, b: Prompt) -> Prompt:
    if isinstance(a, str):
        return f"{a} {b}" if a else str(b)
    return list(a) + list(b)


def shared_prefix(num_requests: int, system_tokens: int, user_tokens: int, output_tokens: int,
                  space: TokenSpace, text: bool = False,
                  user_seed: int | None = None) -> list[Session]:
    """`num_requests` single-request sessions: one system part shared by all + a unique user part.
    The user parts are drawn with `user_seed` (default: space.seed), so runs with the same system
    part and new user parts can follow one another on one server without repeating a prompt."""
    system = _part(space, text, "system", system_tokens)
    users = space if user_seed is None else dataclasses.replace(space, seed=user_seed)
    return [
        Session([Request(_join(system, _part(users, text, f"user:{i}", user_tokens)),
                         output_tokens, session=i)])
        for i in range(num_requests)
    ]


def conversation(num_sessions: int, turns: int, system_tokens: int, user_tokens: int,
                 output_tokens: int, space: TokenSpace, text: bool = False,
                 shared_system_tokens: int = 0) -> list[Session]:
    """Multi-turn sessions. Turn 0 = shared system part (the same in every session, e.g. a
    product's system prompt; `shared_system_tokens`, 0 = none) + system part (own per session,
    e.g. the user's profile or memory) + user part; turn k+1 = turn k's prompt + turn k's output +
    a new user part.

    The "output" put back into the next prompt is a pseudo-random reply of `output_tokens` tokens
    fixed in advance, not what the server answered (the client builds the whole workload before it
    sends anything). A server's prefix cache can therefore reuse turn k's prompt in turn k+1, but
    not the KV it computed for its own reply (as for a client that re-tokenises the reply
    differently).
    """
    if shared_system_tokens < 0:
        raise ValueError(f"shared_system_tokens must be >= 0, got {shared_system_tokens}")
    shared = _part(space, text, "conv:shared-system", shared_system_tokens)
    sessions = []
    for s in range(num_sessions):
        own = _join(_part(space, text, f"conv:{s}:system", system_tokens),
                    _part(space, text, f"conv:{s}:user:0", user_tokens))
        prompt = _join(shared, own) if shared_system_tokens else own
        requests = []
        for t in range(turns):
            requests.append(Request(prompt, output_tokens, session=s, turn=t))
            reply = _part(space, text, f"conv:{s}:reply:{t}", output_tokens)
            prompt = _join(_join(prompt, reply), _part(space, text, f"conv:{s}:user:{t + 1}",
                                                       user_tokens))
        sessions.append(Session(requests))
    return sessions


@dataclasses.dataclass
class TraceRecord:
    """One line of a Mooncake trace."""

    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]


def read_mooncake(path: pathlib.Path, limit: int | None = None) -> list[TraceRecord]:
    """Reads a Mooncake JSONL trace (plain or .gz): timestamp (ms), input_length, output_length,
    hash_ids (one per 512-token block, the last one partial)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    records: list[TraceRecord] = []
    with opener(path, "rt", encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            if limit is not None and len(records) >= limit:
                break
            try:
                row = json.loads(line)
                records.append(TraceRecord(float(row["timestamp"]), int(row["input_length"]),
                                           int(row["output_length"]),
                                           tuple(int(h) for h in row["hash_ids"])))
            except (KeyError, TypeError, ValueError) as e:
                raise ValueError(f"{path}:{line_no}: not a Mooncake record ({e})") from e
    return records


@dataclasses.dataclass
class MooncakeScaling:
    """How a trace made for a large model is shrunk to a small one."""

    block_tokens: int = 16  # tokens per hash id here (the trace's blocks are 512 tokens)
    trace_block_tokens: int = 512  # the trace's own block size
    max_input_tokens: int = 2048  # cap on a scaled prompt
    max_output_tokens: int = 128  # cap on a request's output
    time_scale: float = 1.0  # arrival gaps are multiplied by this (0.5 = twice as fast)


def block_ids(space: TokenSpace, hash_id: int, block_tokens: int) -> list[int]:
    """The token ids of a hash id's block: equal hash ids give equal blocks."""
    return random_ids(space, f"block:{hash_id}", block_tokens)


def mooncake(records: Sequence[TraceRecord], scaling: MooncakeScaling,
             space: TokenSpace) -> list[Session]:
    """One single-request session per record. Each hash id becomes `block_tokens` token ids, so
    requests sharing leading hash ids share that prefix; the prompt is the concatenation cut to
    input_length * block_tokens / trace_block_tokens (at least 1, at most max_input_tokens)."""
    if scaling.block_tokens <= 0 or scaling.trace_block_tokens <= 0:
        raise ValueError("block sizes must be positive")
    factor = scaling.block_tokens / scaling.trace_block_tokens
    t0 = records[0].timestamp_ms if records else 0.0
    sessions = []
    cache: dict[int, list[int]] = {}
    for i, rec in enumerate(records):
        n = min(max(1, round(rec.input_length * factor)), scaling.max_input_tokens)
        prompt: list[int] = []
        for h in rec.hash_ids:
            if len(prompt) >= n:
                break
            if h not in cache:
                cache[h] = block_ids(space, h, scaling.block_tokens)
            prompt.extend(cache[h])
        if len(prompt) < n:  # a record with fewer hash ids than its length implies
            prompt.extend(random_ids(space, f"fill:{i}", n - len(prompt)))
        out = min(max(1, rec.output_length), scaling.max_output_tokens)
        arrival = (rec.timestamp_ms - t0) / 1000.0 * scaling.time_scale
        sessions.append(Session([Request(prompt[:n], out, session=i, hash_ids=rec.hash_ids)],
                                arrival_s=arrival))
    return sessions


def poisson_arrivals(sessions: list[Session], rate: float, seed: int) -> None:
    """Sets each session's arrival_s to a Poisson process of `rate` sessions per second."""
    if rate <= 0:
        raise ValueError(f"--rate must be positive, got {rate}")
    rng = random.Random(f"pagedkv-serve-arrivals:{seed}")
    t = 0.0
    for s in sessions:
        s.arrival_s = t
        t += rng.expovariate(rate)
