"""Databases written before the witness (and replica) fields existed still load and
re-summarize."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson

from crossover.measure import resummarize
from crossover.metrics.summary import RunSummary
from crossover.records.store import Store

#: a record as the store held it before ``after_done_events`` and ``stream_tokens``
OLD_RECORD = {
    "index": 0, "worker": 0, "warmup": False, "prompt_id": 0,
    "expected_prompt_tokens": 5, "expected_output_tokens": 2,
    "t_scheduled_ns": None, "t_send_ns": 1_000, "t_first_ns": 2_000, "t_last_ns": 3_000,
    "t_done_ns": 3_500, "chunk_arrival_ns": [2_000, 3_000], "chunk_chars": [4, 4],
    "chunk_tokens": None, "chunk_emitted_ns": None, "status": 200, "error_kind": None,
    "error": None, "finish_reason": "length", "saw_done": True, "prompt_tokens": 5,
    "completion_tokens": 2, "count_source": "usage", "text_chars": 8, "text": None,
}  # fmt: skip
OLD_CONTEXT = {
    "mode": "concurrency", "output_tokens": 2, "endpoint": "completions",
    "engine": {"name": "vllm", "url": "http://h", "model": "m", "version": None},
    "started_at": "2026-01-01T00:00:00+00:00", "concurrency": 1, "input_tokens": 5,
}  # fmt: skip


def test_an_old_database_still_loads_and_resummarizes(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with Store(path) as store:  # the schema has not changed: only the record blobs grew
        store.create_run("r1", {"context": OLD_CONTEXT})
    db = sqlite3.connect(path)
    db.execute(
        "INSERT INTO requests(run_id, idx, warmup, record) VALUES (?,?,?,?)",
        ("r1", 0, 0, orjson.dumps(OLD_RECORD)),
    )
    db.commit()
    db.close()
    with Store(path) as store:
        (r,) = store.records("r1")
        assert r.after_done_events == 0 and r.stream_tokens is None
        assert r.replica is None  # one server, as every run before replicas
        s = resummarize(store, "r1")  # no engine counter sample: no engine witness
    assert s.verdict == "valid"
    assert s.witnesses.engine is None
    assert s.witnesses.output_tokens.usage == 2


def test_an_old_summary_still_validates() -> None:
    """``crossover.run/1`` only grew: a summary without the new fields still loads."""
    doc = {
        "schema": "crossover.run/1", "verdict": "valid", "problems": [],
        "requests": {"sent": 1, "succeeded": 1, "failed": 0, "matched": 1},
        "load": {"mode": "concurrency", "concurrency": 1},
        "throughput": {}, "ttft_ms": {}, "tpot_ms": {}, "itl_ms": {}, "chunk_gap_ms": {},
        "e2e_ms": {}, "queue_ms": {},
        "engine": {"name": "vllm", "url": "http://h", "model": "m"},
        "workload": {"input_tokens": 5, "output_tokens": 2, "endpoint": "completions"},
        "started_at": "2026-01-01T00:00:00+00:00", "duration_s": 1.0,
    }  # fmt: skip
    s = RunSummary.model_validate(doc)
    assert s.requests.warmup_failed == 0
    assert s.witnesses.output_tokens.usage is None
    out = s.to_json_dict()
    assert out["schema"] == "crossover.run/1" and "witnesses" in out
