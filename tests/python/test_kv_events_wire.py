# Copyright 2026 The pagedkv Authors.
"""KV events on the wire, read the way a vLLM-event consumer reads them.

Starts `pagedkv replay --mode serve --kv-events-endpoint ...` (ipc:// sockets in a temporary
directory), subscribes with plain pyzmq, decodes every batch with plain msgpack (no pagedkv code),
and checks: the vLLM schema field for field, contiguous sequence numbers, stored / removed block
counts equal to the replay's JSON, parents known when a chain continues, and a late subscriber
that recovers every batch through the ROUTER replay socket.

Run by CTest (kv_events_wire_py) with PAGEDKV_BIN pointing at the pagedkv binary.
"""

import json
import os
import subprocess
import threading
import time

import msgpack
import pytest
import zmq

END_SEQ = -1
STORED_KEYS = ["type", "block_hashes", "parent_block_hash", "token_ids", "block_size",
               "lora_id", "medium", "lora_name"]
REMOVED_KEYS = ["type", "block_hashes", "medium"]


def pagedkv_bin():
    path = os.environ.get("PAGEDKV_BIN", "build/pagedkv")
    if not os.path.exists(path):
        pytest.skip(f"pagedkv binary not found at {path} (set PAGEDKV_BIN)")
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


def as_events(batch, encoding):
    """The batch's (ts, events, rank) with each event as a dict keyed by vLLM's names."""
    if encoding == "map":
        assert isinstance(batch, dict) and list(batch)[:2] == ["ts", "events"]
        events = []
        for e in batch["events"]:
            keys = {"BlockStored": STORED_KEYS, "BlockRemoved": REMOVED_KEYS,
                    "AllBlocksCleared": ["type"]}[e["type"]]
            assert list(e) == keys, f"fields differ from vLLM's: {list(e)}"
            events.append(e)
        return batch["ts"], events, batch.get("data_parallel_rank")
    assert isinstance(batch, list) and len(batch) in (2, 3)
    events = []
    for e in batch["events"] if isinstance(batch, dict) else batch[1]:
        keys = {"BlockStored": STORED_KEYS, "BlockRemoved": REMOVED_KEYS,
                "AllBlocksCleared": ["type"]}[e[0]]
        assert len(e) == len(keys)
        events.append(dict(zip(keys, e)))
    return batch[0], events, batch[2] if len(batch) == 3 else None


@pytest.mark.parametrize("encoding,hash_form", [("map", "uint64"), ("array", "bytes")])
def test_live_replay_publisher(tmp_path, encoding, hash_form):
    pub_ep = f"ipc://{tmp_path}/pub"
    replay_ep = f"ipc://{tmp_path}/replay"
    binary = pagedkv_bin()  # may skip: before any socket exists, so nothing is left open
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"kv")
    sub.setsockopt(zmq.RCVHWM, 0)
    sub.connect(pub_ep)  # before the publisher binds: ZeroMQ connects when it appears
    proc = subprocess.Popen(
        [binary, "replay", "--mode", "serve", "--workload", "conversation",
         "--requests", "1500", "--capacity-blocks", "2000", "--json", "--no-progress",
         "--kv-events-endpoint", pub_ep, "--kv-events-replay-endpoint", replay_ep,
         "--kv-events-topic", "kv", "--kv-events-encoding", encoding,
         "--kv-events-hash", hash_form, "--kv-events-hold-s", "60",
         "--kv-events-buffer-steps", "100000"],
        stdout=subprocess.PIPE, text=True)
    try:
        box = {}
        reader = threading.Thread(target=read_json, args=(proc, box))
        reader.start()
        live = []
        quiet_since = None
        while True:
            if sub.poll(100):
                topic, seq_bytes, payload = sub.recv_multipart()
                assert topic == b"kv" and len(seq_bytes) == 8
                live.append((int.from_bytes(seq_bytes, "big"), payload))
                quiet_since = None
            elif not reader.is_alive():
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since > 0.5:
                    break
        reader.join()
        result = box["json"]
        published = result["kv_events"]["published_batches"]
        assert result["kv_events"]["dropped_batches"] == 0
        assert published > 50

        # Live numbers are contiguous; what the subscription missed at the start comes back
        # through the replay socket.
        seqs = [s for s, _ in live]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))) if seqs else True
        dealer = ctx.socket(zmq.DEALER)
        dealer.connect(replay_ep)
        first = seqs[0] if seqs else published
        recovered = [(s, p) for s, p in replay(dealer, 0) if s < first]
        stream = recovered + live
        assert [s for s, _ in stream] == list(range(published))

        stored = removed = cleared = 0
        held = set()
        for _, payload in stream:
            ts, events, rank = as_events(msgpack.unpackb(payload, raw=False), encoding)
            assert isinstance(ts, float)
            assert rank is None
            for e in events:
                for h in e.get("block_hashes", []):
                    if hash_form == "uint64":
                        assert isinstance(h, int) and 0 <= h < 2**64
                    else:
                        assert isinstance(h, bytes) and len(h) == 16
                if e["type"] == "BlockStored":
                    assert e["medium"] == "GPU" and e["lora_id"] is None
                    assert len(e["token_ids"]) == e["block_size"] * len(e["block_hashes"])
                    parent = e["parent_block_hash"]
                    assert parent is None or parent in held, "chain continues an unknown block"
                    held.update(e["block_hashes"])
                    stored += len(e["block_hashes"])
                elif e["type"] == "BlockRemoved":
                    assert e["medium"] == "GPU"
                    held.difference_update(e["block_hashes"])
                    removed += len(e["block_hashes"])
                else:
                    cleared += 1
        print(f"{encoding}: {published} batches, {len(recovered)} recovered, {len(live)} live, "
              f"{stored} stored, {removed} removed")
        assert stored == result["stored_blocks"]
        assert removed == result["evictions"] > 0
        assert cleared == 0

        # A subscriber that joins after the run recovers every batch, byte for byte.
        late = ctx.socket(zmq.DEALER)
        late.connect(replay_ep)
        assert replay(late, 0) == stream
        assert replay(late, published - 3) == stream[-3:]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        ctx.destroy(linger=0)
