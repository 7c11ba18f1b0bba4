"""The store's writer thread: batched commits, records committed as they arrive, and a
killed client keeps what was committed."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import orjson
import pytest

from crossover.records.model import RequestRecord
from crossover.records.store import RecordSink, Store


def _rec(i: int, n: int = 8) -> RequestRecord:
    return RequestRecord(
        index=i,
        expected_output_tokens=n,
        t_send_ns=1_000 + i,
        t_first_ns=2_000 + i,
        chunk_arrival_ns=list(range(2_000, 2_000 + n)),
        chunk_chars=[4] * n,
        chunk_emitted_ns=list(range(1_900, 1_900 + n)),
        finish_reason="length",
        completion_tokens=n,
        count_source="usage",
        text=" tok" * n,
    )


def _count(path: Path) -> int:
    db = sqlite3.connect(str(path), timeout=30)
    try:
        return int(db.execute("SELECT COUNT(*) FROM requests").fetchone()[0])
    finally:
        db.close()


def test_to_json_is_model_dump() -> None:
    r = _rec(3)
    assert orjson.loads(r.to_json()) == r.model_dump()
    assert RequestRecord.model_validate(orjson.loads(r.to_json())) == r


def test_writer_batches_what_queued_up_while_it_was_busy(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    store = Store(path)
    store.create_run("run", {"x": 1})
    # hold the write lock from another connection: the writer's next commit waits, and
    # everything queued meanwhile must go into one transaction
    blocker = sqlite3.connect(str(path), isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    for i in range(300):
        store.add_record("run", _rec(i))
    time.sleep(0.2)
    blocker.execute("COMMIT")
    blocker.close()
    store.flush()
    stats = store.writer_stats
    assert stats["rows"] == 301  # create_run + 300 records
    # one row at a time would be ~300 transactions; the first batch may take what was
    # queued before the writer reached the lock (236 rows were left on a busy 2-core CI)
    assert stats["batches"] <= 4
    assert stats["largest_batch"] >= 150
    assert [r.index for r in store.records("run")] == list(range(300))
    store.close()


def test_records_are_committed_without_a_flush(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    store = Store(path)
    store.create_run("run", {})
    store.add_record("run", _rec(0))
    deadline = time.monotonic() + 5
    while _count(path) < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _count(path) == 1  # seen by another connection: committed, not just queued
    store.close()


def test_reads_wait_for_queued_writes(tmp_path: Path) -> None:
    with Store(tmp_path / "r.db") as store:
        store.create_run("run", {})
        for i in range(50):
            store.add_record("run", _rec(i))
        assert len(store.records("run")) == 50  # no explicit flush
        store.finish_run("run", "done", {"ok": True})
        row = store.run("run")
        assert row is not None and row.status == "done" and row.summary == {"ok": True}


def test_a_killed_writer_keeps_its_committed_records(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    script = textwrap.dedent(
        f"""
        import sys, time
        from crossover.records.model import RequestRecord
        from crossover.records.store import Store
        store = Store({str(path)!r})
        store.create_run("run", {{}}, key="k")
        def rec(i):
            return RequestRecord(index=i, expected_output_tokens=4, t_send_ns=i,
                                 chunk_arrival_ns=[1, 2, 3, 4])
        for i in range(100):
            store.add_record("run", rec(i))
        store.flush()
        print("committed", flush=True)
        i = 100
        while True:  # keeps writing until killed
            store.add_record("run", rec(i))
            i += 1
            if i % 100 == 0:
                time.sleep(0.001)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "committed"
        time.sleep(0.3)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    with Store(path) as store:
        recs = store.records("run")
        row = store.run("run")
    assert row is not None and row.status == "running"  # what an interrupted sweep resumes
    assert len(recs) >= 100
    assert [r.index for r in recs] == list(range(len(recs)))  # whole batches, no gaps


def test_writer_error_reaches_the_caller(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    store = Store(path)
    store.create_run("run", {})
    other = sqlite3.connect(str(path), isolation_level=None)
    other.execute("DROP TABLE samples")  # the writer's next statement fails
    other.close()
    store.add_sample("run", "x", 0.0, {})
    with pytest.raises(sqlite3.OperationalError, match="samples"):
        store.flush()
    with pytest.raises(sqlite3.OperationalError):  # and every later write says so too
        store.add_record("run", _rec(0))


def test_a_sink_holds_records_and_hands_them_over_in_one_batch(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    with Store(path) as store:
        store.create_run("run", {})
        store.flush()
        before = store.writer_stats["batches"]
        sink = RecordSink(store, "run", hold_s=3600.0)
        for i in range(200):
            sink.add(_rec(i))
        time.sleep(0.1)
        assert sink.held == 200
        assert _count(path) == 0  # nothing reached the writer while the load runs
        sink.flush()
        store.flush()
        assert sink.held == 0
        assert store.writer_stats["batches"] == before + 1  # one wake-up, one commit
        assert [r.index for r in store.records("run")] == list(range(200))


def test_a_sink_hands_over_once_its_oldest_record_is_hold_s_old(tmp_path: Path) -> None:
    with Store(tmp_path / "r.db") as store:
        store.create_run("run", {})
        sink = RecordSink(store, "run", hold_s=0.05)
        sink.add(_rec(0))
        sink.add(_rec(1))
        assert sink.held == 2
        time.sleep(0.06)
        sink.add(_rec(2))  # the first add after the hold: all three go
        assert sink.held == 0
        assert len(store.records("run")) == 3
        sink.add(_rec(3))  # a new hold starts
        assert sink.held == 1
