# Copyright 2026 The pagedkv Authors.
"""KV events on the wire, read by the consumers that read vLLM's events.

Starts `pagedkv replay --mode serve --kv-events-endpoint ...` (ipc:// sockets in a temporary
directory) and reads what it publishes over real ZeroMQ sockets:
- with vLLM 0.33's own decoder: `msgspec.msgpack.Decoder(KVEventBatch)` over the structs below,
  written out field for field as vllm/distributed/kv_events.py of vLLM 0.33.0 declares them (vLLM
  itself imports torch, too heavy for CI); every batch must decode, and its content must equal
  what pagedkv's own decoder (`pagedkv kv-events listen`) reads from the same stream;
- with plain msgpack for the older layouts (all-map, all-array);
- with NVIDIA Dynamo's standalone KV indexer (`python -m dynamo.indexer`, ai-dynamo-runtime), whose
  overlap scores must equal the prefix pagedkv holds, block for block.
Also: a subscriber that connects before the publisher loses nothing, stored / removed counts equal
the replay's JSON, and a late subscriber recovers every batch through the ROUTER replay socket.

Run by CTest (python_pytest) with PAGEDKV_CLI pointing at the pagedkv binary; msgspec and Dynamo
come from scripts/python_refs.sh (the tests that need them skip without them).
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from typing import Any

import msgpack
import pytest
import zmq

try:
    import msgspec
except ImportError:  # pragma: no cover - the reference venv brings it
    msgspec = None

END_SEQ = -1
STORED_KEYS = ["type", "block_hashes", "parent_block_hash", "token_ids", "block_size",
               "lora_id", "medium", "lora_name"]
REMOVED_KEYS = ["type", "block_hashes", "medium"]

if msgspec is not None:
    # vllm/distributed/kv_events.py, vLLM 0.33.0: the wire structs and their options. Bytes | int
    # is ExternalBlockHash (vllm/v1/core/kv_cache_utils.py). The __hash__ methods vLLM adds for
    # its multi-worker aggregator play no part in decoding and are left out.
    class EventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
        ts: float
        events: list[Any]
        data_parallel_rank: int | None = None

    class KVCacheEvent(msgspec.Struct, omit_defaults=True, gc=False, tag=True):
        """Base class for all KV cache-related events."""

    class BlockStored(KVCacheEvent):
        block_hashes: list[bytes | int]
        parent_block_hash: bytes | int | None
        token_ids: list[int]
        block_size: int
        lora_id: int | None
        medium: str | None
        lora_name: str | None
        extra_keys: list[tuple[Any, ...] | None] | None = None
        group_idx: int | None = None
        kv_cache_spec_kind: str | None = None
        kv_cache_spec_sliding_window: int | None = None
        locality: str | None = None
        ownership: str | None = None
        session_id: str | None = None
        lookahead_token_ids: list[list[int]] | None = None

    class BlockRemoved(KVCacheEvent):
        block_hashes: list[bytes | int]
        medium: str | None
        group_idx: int | None = None
        locality: str | None = None
        ownership: str | None = None

    class AllBlocksCleared(KVCacheEvent):
        pass

    class KVEventBatch(EventBatch):
        events: list[BlockStored | BlockRemoved | AllBlocksCleared]


def pagedkv_bin():
    path = os.environ.get("PAGEDKV_CLI", os.environ.get("PAGEDKV_BIN", "build/pagedkv"))
    if not os.path.exists(path):
        pytest.skip(f"pagedkv binary not found at {path} (set PAGEDKV_CLI)")
    return path


def read_json(proc, box):
    """Reads the replay's JSON object from stdout (the process then keeps its sockets open)."""
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.rstrip() == "}":
            break
    box["json"] = json.loads("".join(lines))


def replay(dealer, start):
    """Asks the ROUTER for every buffered batch from `start`; returns [(seq, payload)]."""
    dealer.send_multipart([b"", start.to_bytes(8, "big")])
    out = []
    while True:
        assert dealer.poll(10000), "no answer from the replay socket"
        empty, seq_bytes, payload = dealer.recv_multipart()
        assert empty == b""
        seq = int.from_bytes(seq_bytes, "big", signed=True)
        if seq == END_SEQ:
            assert payload == b""
            return out
        out.append((seq, payload))


def as_events(payload, encoding):
    """The batch's (ts, events, rank), each event a dict keyed by vLLM's names; checks the layout."""
    if encoding == "vllm":
        # Exactly what vLLM 0.33's decoder accepts, and the same content read without it.
        typed = msgspec.msgpack.Decoder(KVEventBatch).decode(payload)
        raw = msgpack.unpackb(payload, raw=False)
        assert isinstance(raw, list) and len(raw) == 3, "batch must be [ts, events, rank]"
        events = []
        for e, t in zip(raw[1], typed.events):
            keys = {"BlockStored": STORED_KEYS + ["group_idx"],
                    "BlockRemoved": REMOVED_KEYS + ["group_idx"],
                    "AllBlocksCleared": ["type"]}[e["type"]]
            assert list(e) == keys, f"fields differ from vLLM 0.33's: {list(e)}"
            assert type(t).__name__ == e["type"]
            assert {k: getattr(t, k) for k in keys if k != "type"} == \
                {k: e[k] for k in keys if k != "type"}
            events.append(e)
        assert typed.ts == raw[0] and typed.data_parallel_rank == raw[2]
        return typed.ts, events, typed.data_parallel_rank
    batch = msgpack.unpackb(payload, raw=False)
    if encoding == "all-map":
        assert isinstance(batch, dict) and list(batch) == ["ts", "events", "data_parallel_rank"]
        for e in batch["events"]:
            keys = {"BlockStored": STORED_KEYS, "BlockRemoved": REMOVED_KEYS,
                    "AllBlocksCleared": ["type"]}[e["type"]]
            assert list(e) == keys, f"fields differ from the all-map layout: {list(e)}"
        return batch["ts"], batch["events"], batch["data_parallel_rank"]
    assert isinstance(batch, list) and len(batch) == 3
    events = []
    for e in batch[1]:
        keys = {"BlockStored": STORED_KEYS, "BlockRemoved": REMOVED_KEYS,
                "AllBlocksCleared": ["type"]}[e[0]]
        assert len(e) == len(keys)
        events.append(dict(zip(keys, e)))
    return batch[0], events, batch[2]


def hash_hex(h):
    """A wire hash as pagedkv's BlockHash::ToString prints it (high word, then low word)."""
    if isinstance(h, int):
        return f"{0:016x}{h:016x}"
    return h.rjust(16, b"\0").hex()


class Run:
    """A serve-mode replay publishing its events; the subscriber connects before it starts."""

    def __init__(self, tmp_path, encoding, hash_form, requests=1500, subscribe=True):
        self.pub_ep = f"ipc://{tmp_path}/pub"
        self.replay_ep = f"ipc://{tmp_path}/replay"
        self.binary = pagedkv_bin()  # may skip: before any socket exists
        self.ctx = zmq.Context()
        self.sub = self.ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.SUBSCRIBE, b"kv")
        self.sub.setsockopt(zmq.RCVHWM, 0)
        if subscribe:  # before the publisher binds: ZeroMQ connects when it appears
            self.sub.connect(self.pub_ep)
        self.proc = subprocess.Popen(
            [self.binary, "replay", "--mode", "serve", "--workload", "conversation",
             "--requests", str(requests), "--capacity-blocks", "2000", "--block-size", "16",
             "--json", "--no-progress",
             "--kv-events-endpoint", self.pub_ep, "--kv-events-replay-endpoint", self.replay_ep,
             "--kv-events-topic", "kv", "--kv-events-encoding", encoding,
             "--kv-events-hash", hash_form, "--kv-events-hold-s", "60",
             "--kv-events-buffer-steps", "100000", "--kv-events-wait-subscriber-s", "20"],
            stdout=subprocess.PIPE, text=True)

    def collect(self):
        """Every live (seq, payload) until the run ended and the stream went quiet; the JSON."""
        box = {}
        reader = threading.Thread(target=read_json, args=(self.proc, box))
        reader.start()
        live = []
        quiet_since = None
        while True:
            if self.sub.poll(100):
                topic, seq_bytes, payload = self.sub.recv_multipart()
                assert topic == b"kv" and len(seq_bytes) == 8
                live.append((int.from_bytes(seq_bytes, "big"), payload))
                quiet_since = None
            elif not reader.is_alive():
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since > 0.5:
                    break
        reader.join()
        return live, box["json"]

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.ctx.destroy(linger=0)


def check_stream(stream, encoding, hash_form, result):
    """Walks every batch: layout, hash form, chains; returns (held blocks {hash: tokens}, counts)."""
    stored = removed = cleared = 0
    held = {}
    for _, payload in stream:
        ts, events, rank = as_events(payload, encoding)
        assert isinstance(ts, float)
        assert rank == 0  # the publisher fills the rank, as vLLM's does
        for e in events:
            for h in e.get("block_hashes", []):
                if hash_form == "uint64":
                    assert isinstance(h, int) and 0 <= h < 2**64
                else:
                    assert isinstance(h, bytes) and len(h) == 16
            if e["type"] == "BlockStored":
                assert e["medium"] == "GPU" and e["lora_id"] is None and e["lora_name"] is None
                bs = e["block_size"]
                assert len(e["token_ids"]) == bs * len(e["block_hashes"])
                parent = e["parent_block_hash"]
                assert parent is None or parent in held, "chain continues an unknown block"
                for i, h in enumerate(e["block_hashes"]):
                    prev = parent if i == 0 else e["block_hashes"][i - 1]
                    held[h] = (prev, tuple(e["token_ids"][i * bs:(i + 1) * bs]))
                stored += len(e["block_hashes"])
            elif e["type"] == "BlockRemoved":
                assert e["medium"] == "GPU"
                for h in e["block_hashes"]:
                    held.pop(h, None)
                removed += len(e["block_hashes"])
            else:
                cleared += 1
    assert stored == result["stored_blocks"]
    assert removed == result["evictions"] > 0
    assert cleared == 0
    # Every block still held: the pool's contents, stored - evictions of them.
    assert len(held) == stored - removed
    return held


@pytest.mark.parametrize("encoding,hash_form",
                         [("vllm", "uint64"), ("vllm", "bytes"), ("all-map", "uint64"),
                          ("all-array", "bytes")])
def test_live_replay_publisher(tmp_path, encoding, hash_form):
    if encoding == "vllm" and msgspec is None:
        pytest.skip("msgspec (vLLM's decoder) is not installed; run scripts/python_refs.sh")
    run = Run(tmp_path, encoding, hash_form)
    try:
        live, result = run.collect()
        published = result["kv_events"]["published_batches"]
        assert result["kv_events"]["dropped_batches"] == 0
        assert result["kv_events"]["subscribed"] is True
        assert published > 50
        # The publisher held its first batch until this subscription arrived: nothing was lost,
        # every batch arrived live, in order.
        assert [s for s, _ in live] == list(range(published))
        check_stream(live, encoding, hash_form, result)

        # A subscriber that joins after the run recovers every batch, byte for byte.
        late = run.ctx.socket(zmq.DEALER)
        late.connect(run.replay_ep)
        assert replay(late, 0) == live
        assert replay(late, published - 3) == live[-3:]
    finally:
        run.close()


@pytest.mark.skipif(msgspec is None, reason="msgspec (vLLM's decoder) is not installed")
def test_pagedkv_listener_reads_what_vllm_decodes(tmp_path):
    """pagedkv's own decoder (kv-events listen) and vLLM's read the same stream identically."""
    run = Run(tmp_path, "vllm", "uint64", requests=300)
    try:
        live, result = run.collect()
        listener = subprocess.run(
            [run.binary, "kv-events", "listen", run.pub_ep, "--replay-endpoint", run.replay_ep,
             "--topic", "kv", "--from-seq", "0", "--max-batches",
             str(result["kv_events"]["published_batches"])],
            capture_output=True, text=True, timeout=60)
        assert listener.returncode == 0, listener.stderr
        ours = [json.loads(line) for line in listener.stdout.splitlines()]
        assert [b["seq"] for b in ours] == [s for s, _ in live]
        decoder = msgspec.msgpack.Decoder(KVEventBatch)
        for mine, (_, payload) in zip(ours, live):
            theirs = decoder.decode(payload)
            assert mine["ts"] == theirs.ts and mine["data_parallel_rank"] == 0
            assert len(mine["events"]) == len(theirs.events)
            for a, b in zip(mine["events"], theirs.events):
                assert a["type"] == type(b).__name__
                assert a["block_hashes"] == [hash_hex(h) for h in b.block_hashes]
                assert a["medium"] == b.medium and a["group_idx"] == b.group_idx == 0
                if isinstance(b, BlockStored):
                    assert a["num_token_ids"] == len(b.token_ids)
                    assert a["block_size"] == b.block_size
                    assert a["parent_block_hash"] == (
                        None if b.parent_block_hash is None else hash_hex(b.parent_block_hash))
        # --max-batches stops there, even when one replay brings the whole stream at once.
        first3 = subprocess.run(
            [run.binary, "kv-events", "listen", run.pub_ep, "--replay-endpoint", run.replay_ep,
             "--topic", "kv", "--from-seq", "0", "--max-batches", "3"],
            capture_output=True, text=True, timeout=60)
        assert first3.returncode == 0, first3.stderr
        assert [json.loads(line)["seq"] for line in first3.stdout.splitlines()] == [0, 1, 2]
    finally:
        run.close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_json(url, body=None, timeout=10):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        text = resp.read()
    return json.loads(text) if text else None


def dynamo_available():
    try:
        import dynamo.llm  # noqa: F401
    except Exception:  # noqa: BLE001 - any import failure means: not installed here
        return False
    return True


@pytest.mark.skipif(not dynamo_available(),
                    reason="ai-dynamo-runtime is not installed; run scripts/python_refs.sh")
def test_dynamo_indexer_matches_pagedkv_prefix(tmp_path):
    """Dynamo's standalone KV indexer, fed by pagedkv's events, scores each prompt by exactly the
    number of leading blocks pagedkv holds."""
    port = free_port()
    pub_ep = f"ipc://{tmp_path}/pub"
    # The indexer is the only subscriber, connected before the publisher exists: the publisher
    # waits for its subscription, so it sees every batch live.
    indexer = subprocess.Popen(
        [sys.executable, "-m", "dynamo.indexer", "--port", str(port), "--threads", "1",
         "--block-size", "16", "--workers", f"7={pub_ep}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    run = None
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                http_json(url + "/health")
                break
            except OSError:
                assert indexer.poll() is None, indexer.stderr.read()
                assert time.monotonic() < deadline, "dynamo.indexer did not come up"
                time.sleep(0.2)
        run = Run(tmp_path, "vllm", "uint64", requests=400, subscribe=False)
        _, result = run.collect()
        assert result["kv_events"]["subscribed"] is True
        dealer = run.ctx.socket(zmq.DEALER)
        dealer.connect(run.replay_ep)
        stream = replay(dealer, 0)
        assert [s for s, _ in stream] == list(range(result["kv_events"]["published_batches"]))
        held = check_stream(stream, "vllm", "uint64", result)
        # Chains of what pagedkv holds at the end: each chain end's blocks back to the chain's
        # first block. pagedkv evicts blocks whose parent left first, so every chain is whole.
        def chain(h):
            out = []
            while h is not None:
                assert h in held, "a held block whose parent is gone (unreachable)"
                parent, tokens = held[h]
                out.append(tokens)
                h = parent
            return out[::-1]
        parents = {p for p, _ in held.values()}
        tips = [h for h in held if h not in parents]
        assert tips
        def score(prompt):
            return http_json(url + "/query", {"token_ids": prompt, "model_name": "default"})

        # The indexer applies events asynchronously: wait until it has the last chain.
        last = [t for b in chain(tips[-1]) for t in b]
        for _ in range(200):
            if score(last).get("scores"):
                break
            time.sleep(0.05)
        checked = 0
        for n, tip in enumerate(tips[:40]):
            blocks = chain(tip)
            # Dynamo scores in tokens (its block size times the blocks matched), per worker and
            # data-parallel rank: pagedkv's whole cached chain, then a prompt that leaves it
            # after k blocks.
            prompt = [t for b in blocks for t in b] + [1, 2, 3]  # a partial block after it
            assert score(prompt)["scores"] == {"7": {"0": 16 * len(blocks)}}, len(blocks)
            k = n % len(blocks)
            diverged = [t for b in blocks[:k] for t in b] + [10**6] * 16
            want = {"7": {"0": 16 * k}} if k else {}
            assert score(diverged)["scores"] == want, (k, len(blocks))
            checked += 1
        print(f"dynamo indexer: {checked} prompts scored exactly; {len(held)} blocks held")
    finally:
        indexer.terminate()
        indexer.wait(timeout=30)
        if run is not None:
            run.close()
