"""bench/serve/to_mooncake.py: a load_client run written as a Mooncake trace whose hash ids are
equal exactly where the prompts share whole 16-token blocks (no model server needed)."""

from __future__ import annotations

import json
import pathlib
import sys

SERVE = pathlib.Path(__file__).resolve().parents[2] / "bench" / "serve"
sys.path.insert(0, str(SERVE))

import load_client  # noqa: E402
import to_mooncake  # noqa: E402


def test_a_conversation_run_becomes_a_trace_of_shared_block_chains(tmp_path) -> None:
    args = load_client.parse_args(["--base-url", "http://127.0.0.1:1", "--workload",
                                   "conversation", "--sessions", "2", "--turns", "2",
                                   "--system-tokens", "40", "--user-tokens", "9",
                                   "--output-tokens", "5", "--vocab", "49152"])
    sessions, _ = load_client.build(args)
    requests = [{"session": r.session, "turn": r.turn, "start": 10.0 + i, "error": None,
                 "unfinished": False, "completion_tokens": 5}
                for i, r in enumerate(x for s in sessions for x in s.requests)]
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"config": vars(args), "requests": requests}))
    trace = tmp_path / "trace.jsonl"
    assert to_mooncake.main([str(run), str(trace)]) == 0
    lines = [json.loads(x) for x in trace.read_text().splitlines()]
    assert [x["timestamp"] for x in lines] == [0.0, 1000.0, 2000.0, 3000.0]
    assert [x["input_length"] for x in lines] == [49, 63, 49, 63]
    ids = [x["hash_ids"] for x in lines]
    assert [len(i) for i in ids] == [4, 4, 4, 4]  # 49 = 3 full blocks + 1, 63 = 3 + 15
    assert ids[1][:3] == ids[0][:3] and ids[1][3] != ids[0][3]  # the next turn: 3 full blocks
    assert not set(ids[2]) & set(ids[0] + ids[1])  # sessions share nothing
    assert len({i for x in ids for i in x}) == 3 + 1 + 1 + 3 + 1 + 1
