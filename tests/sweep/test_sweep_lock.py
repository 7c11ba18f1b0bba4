"""One writer per sweep folder (``crossover.records.folder_lock``): a second
``SweepRunner`` on a folder another holds is refused before it opens or changes anything
there, naming the holder's pid and command; closed, the first leaves it free. Through the
CLI (``crossover sweep``, ``crossover decide``): one line, exit 2, the folder as it was.
Two sweeps on one folder both ran: the second resumed the first's runs and started its
engine beside the first's on the same GPU."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from crossover.cli.app import main
from crossover.errors import UsageError
from crossover.records.folder_lock import FolderBusyError, FolderLock
from crossover.records.store import Store
from crossover.sweep.config import SweepConfig
from crossover.sweep.driver import SweepRunner
from crossover.sweep.resume import forget_empty_sweep
from tests.errlines import one_line_error
from tests.records.test_folder_lock import held_by_child

from .conftest import Linear, child_env, crossover_cmd, read_sweep, servers

FAST = Linear(a_ms=1.0, b_ms=0.0, ttft_ms=2.0)


def _mapping(*urls: str) -> dict[str, object]:
    return {
        "name": "lock",
        "targets": [
            {"name": f"T{i}", "url": url, "engine": "vllm", "model": "calibration"}
            for i, url in enumerate(urls)
        ],
        "concurrency": [1],
        "requests_per_level": 4,
        "warmup_requests": 0,
        "output_tokens": 4,
        "input_tokens": 8,
        "client_floor": "off",
    }


def _state(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of the folder, its bytes and modification time."""
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_a_second_runner_is_refused_while_the_first_holds_the_folder(tmp_path: Path) -> None:
    cfg = SweepConfig.model_validate(_mapping("http://127.0.0.1:9"))
    first = SweepRunner(cfg, tmp_path, command="decide")
    try:
        before = _state(tmp_path)
        with pytest.raises(FolderBusyError) as caught:
            SweepRunner(cfg, tmp_path)
        assert f"(pid {os.getpid()}, crossover decide since " in str(caught.value)
        assert str(caught.value).startswith(f"{tmp_path} is being written by another crossover")
        assert _state(tmp_path) == before  # not its sweep.db, not the lock file's holder
        first.store.set_meta("still", "writable")  # the first goes on as it was
    finally:
        first.close()
    second = SweepRunner(cfg, tmp_path)  # closed, the first left the folder free
    try:
        assert second.store.get_meta("still") == "writable"
    finally:
        second.close()


def test_a_runner_refused_for_another_workload_leaves_the_folder_free(tmp_path: Path) -> None:
    cfg = SweepConfig.model_validate(_mapping("http://127.0.0.1:9"))
    SweepRunner(cfg, tmp_path).close()
    other = SweepConfig.model_validate({**_mapping("http://127.0.0.1:9"), "output_tokens": 5})
    # kept: the refusal's traceback holds the refused runner, so no collection frees it
    with pytest.raises(UsageError, match="holds a sweep with a different workload") as caught:
        SweepRunner(other, tmp_path)
    SweepRunner(cfg, tmp_path).close()  # the refused one let it go
    assert caught.value.exit_code == 2


def test_a_refused_sweep_does_not_forget_the_holders_new_database(tmp_path: Path) -> None:
    """A sweep refused after it looked (no sweep.db yet) cleans up what it created
    without a run: not the database another sweep has just begun there."""
    cfg = SweepConfig.model_validate(_mapping("http://127.0.0.1:9"))
    out = tmp_path / "res"
    holder = SweepRunner(cfg, out)
    try:
        forget_empty_sweep(out, fresh=True, had_db=False)
        assert (out / "sweep.db").is_file()
    finally:
        holder.close()
    forget_empty_sweep(out, fresh=True, had_db=False)  # free now: its own to forget
    assert not out.exists()


def _refused_while_held(
    out: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    """``argv``'s exit code and its one error line while a sweep holds ``out``'s lock;
    the folder's files are checked unchanged."""
    holder = FolderLock.take(out, "sweep")
    try:
        before = _state(out)
        rc = main(argv)
        line = one_line_error(capsys)
        assert _state(out) == before
    finally:
        holder.release()
    return rc, line


def test_decide_is_refused_on_a_folder_a_sweep_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "res"
    with servers(FAST, FAST) as urls:
        config = tmp_path / "sweep.yaml"
        config.write_text(yaml.safe_dump(_mapping(*urls)))
        rc, line = _refused_while_held(
            out, ["decide", "--config", str(config), "--out", str(out)], capsys
        )
    assert rc == 2
    assert line.startswith(f"error: {out} is being written by another crossover process ")
    assert f"(pid {os.getpid()}, crossover sweep since " in line
    assert line.endswith("wait for it to end, or give another --out")


def test_sweep_cli_is_refused_while_another_process_holds_the_folder(tmp_path: Path) -> None:
    out = tmp_path / "res"
    with servers(FAST) as urls:
        config = tmp_path / "sweep.yaml"
        config.write_text(yaml.safe_dump(_mapping(*urls)))
        cfg = SweepConfig.model_validate(_mapping(*urls))
        SweepRunner(cfg, out).close()  # a sweep begun there before: its sweep.db
        (out / "engines").mkdir()
        (out / "engines" / "T0.log").write_text("an earlier engine's log\n")
        argv = crossover_cmd("sweep", "--config", str(config), "--out", str(out), "--no-report")
        with held_by_child(out, "decide") as child:
            before = _state(out)
            got = subprocess.run(argv, env=child_env(), capture_output=True, text=True)
            after = _state(out)
        assert got.returncode == 2, got.stderr
        assert "Traceback" not in got.stderr
        lines = [ln for ln in got.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1, got.stderr
        assert lines[0].startswith(f"error: {out} is being written by another crossover process")
        assert f"(pid {child.pid}, crossover decide since " in lines[0]
        assert after == before  # nothing touched: the database, the log, the holder's line
        # the holder gone (killed: the kernel dropped its lock), the same command runs
        again = subprocess.run(argv, env=child_env(), capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert len(read_sweep(out)["runs"]) == 1
    with Store(out / "sweep.db", read_only=True) as store:
        assert len(store.runs()) == 1


def test_readers_take_no_lock(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``report``, ``summarize`` and ``compare`` read a sweep while its writer holds the
    folder (a report of a running sweep is a supported use)."""
    out = tmp_path / "res"
    with servers(FAST) as urls:
        config = tmp_path / "sweep.yaml"
        config.write_text(yaml.safe_dump(_mapping(*urls)))
        assert main(["sweep", "--config", str(config), "--out", str(out), "--no-report"]) == 0
    with FolderLock.take(out, "sweep"):
        assert main(["summarize", str(out / "sweep.db")]) == 0
        assert main(["compare", str(out), str(out)]) == 0
        assert main(["report", str(out), "--out", str(tmp_path / "r.html")]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_demo_fresh_is_refused_while_another_process_holds_the_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``crossover demo --fresh`` discards OUT first: never while a sweep writes it."""
    out = tmp_path / "demo"
    out.mkdir()
    (out / "sweep.db").write_bytes(b"a sweep's records")
    rc, line = _refused_while_held(out, ["demo", "--out", str(out), "--fresh"], capsys)
    assert rc == 2
    assert line.startswith(f"error: {out} is being written by another crossover process ")


@pytest.mark.parametrize("command", ["sweep", "decide"])
def test_a_busy_folder_is_refused_before_the_targets_are_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """The folder's lock is probed before the config's checks: a target nobody serves
    (port 9) would otherwise be the error, after its connection attempts."""
    out = tmp_path / "res"
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump(_mapping("http://127.0.0.1:9", "http://127.0.0.1:9")))
    rc, line = _refused_while_held(
        out, [command, "--config", str(config), "--out", str(out)], capsys
    )
    assert rc == 2
    assert line.startswith(f"error: {out} is being written by another crossover process ")
