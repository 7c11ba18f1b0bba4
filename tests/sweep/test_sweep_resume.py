"""An interrupted sweep resumes: ``crossover sweep`` in a child process is stopped in the
middle of a level (Ctrl-C, then SIGKILL), and the same command run again keeps every
finished run, redoes the one in flight, and loses none."""

from __future__ import annotations

import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from crossover.records.store import Store

from .conftest import (
    Linear,
    child_env,
    crossover_cmd,
    db_records,
    db_runs,
    read_sweep,
    servers,
    start_and_interrupt,
    target_flags,
)

pytestmark = pytest.mark.slow

LEVELS = (1, 2, 4)
PER_LEVEL = 6
SLOW = Linear(a_ms=25.0, b_ms=0.0, ttft_ms=5.0)  # one request of 8 tokens: ~180 ms


def _argv(urls: list[str], out: Path) -> list[str]:
    return crossover_cmd(
        "sweep", *target_flags({"A": urls[0], "B": urls[1]}),
        "--concurrency", ",".join(map(str, LEVELS)), "--requests-per-level", str(PER_LEVEL),
        "--output-tokens", "8", "--input-tokens", "16", "--warmup", "0",
        "--out", str(out), "--no-report",
    )  # fmt: skip


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["sigint", "sigkill"])
def test_interrupted_sweep_resumes(tmp_path: Path, sig: signal.Signals) -> None:
    out = tmp_path / "sweep"
    with servers(SLOW, SLOW) as urls:
        argv = _argv(urls, out)
        first = start_and_interrupt(argv, out, sig, after_done=1)
        before = db_runs(out)
        if sig == signal.SIGINT:
            assert first.returncode == 130
            assert "Traceback" not in first.stderr
            # one line: the interruption and what to do (rich may wrap it on a narrow tty)
            lines = [ln for ln in first.stderr.splitlines() if ln.strip()]
            assert lines[-1].startswith("error: interrupted"), first.stderr
            assert sum(ln.startswith("error:") for ln in lines) == 1
            # the level in flight is marked, not left "running"
            assert [r.status for r in before if r.status != "done"] == ["interrupted"]
            # and the requests it had in flight are recorded as failed, not dropped
            (cut_run,) = [r for r in before if r.status == "interrupted"]
            with Store(out / "sweep.db") as store:
                recs = store.records(cut_run.run_id)
            assert any(r.error == "cancelled: interrupted" for r in recs)
            assert all(r.t_send_ns for r in recs)
        else:
            assert first.returncode == -signal.SIGKILL
            assert [r.status for r in before if r.status != "done"] == ["running"]
        finished = {r.key: r.run_id for r in before if r.status == "done"}
        cut = [r.key for r in before if r.status != "done"]
        assert len(finished) >= 1
        second = subprocess.run(
            argv, capture_output=True, text=True, env=child_env(), timeout=60, check=False
        )
    assert second.returncode == 0, second.stderr
    assert f"{len(finished)} kept from before" in second.stdout
    after = db_runs(out)
    done = [r for r in after if r.status == "done"]
    # finished runs kept, not repeated: the same run ids, one done run per key
    assert Counter(r.key for r in done).most_common(1)[0][1] == 1
    assert {k: v for k, v in ((r.key, r.run_id) for r in done) if k in finished} == finished
    # the run in flight was redone under its key
    assert set(cut) <= {r.key for r in done}
    keys = {f"{t}|c={c}|r=0" for t in "AB" for c in LEVELS}
    assert {r.key for r in done} == keys
    # sweep.json: every key exactly once
    sweep = read_sweep(out)
    got = [f"{r['target']}|c={r['concurrency']}|r={r['repeat']}" for r in sweep["runs"]]
    assert sorted(got) == sorted(keys)
    # none lost: every finished run recorded exactly the requests it sent
    for r in done:
        assert r.summary is not None
        sent = r.summary["requests"]["sent"]
        assert sent == PER_LEVEL
        assert db_records(out, r.run_id) == sent
        assert r.summary["verdict"] == "valid"
        # the resumed command finds its prompts stored, and still re-tokenizes every
        # stream with the server's /tokenize (before, its runs asked no text witness)
        assert r.summary["witnesses"]["output_tokens"]["stream_text_requests"] == sent, r.key
