"""``restart_between_repeats: true``: each repeat measured in its own engine start. A
launched target runs all its levels of repeat 0, its engine is stopped and started again
(warmed up again), then all levels of repeat 1, so the interval over repeats holds the
start-to-start variation. Every start is in ``engine_starts``; a resumed sweep starts the
engine again only for repeats with levels left; ``interleave`` stops every engine after
each repeat. URL targets (nothing to restart) and ``crossover decide`` (it repeats a level
only where a sign is uncertain) refuse it with one line. The engine is the calibration
server behind llama-server's flags (calib_engine.py), launched by the sweep."""

from __future__ import annotations

import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from crossover.cli.app import main
from crossover.records.store import RunRow, Store

from .conftest import (
    Linear,
    calib_engine_target,
    crossover_cmd,
    db_runs,
    one_error_line,
    read_sweep,
    servers,
    start_and_interrupt,
    sweep_in,
)

LEVELS = [1, 2]


def _config(
    tmp_path: Path,
    names: tuple[str, ...] = ("E",),
    repeats: int = 2,
    latency: dict[str, float] | None = None,
    **more: Any,
) -> Path:
    targets = [
        calib_engine_target(
            tmp_path, n, latency, env={"CALIB_ENGINE_STARTS": str(tmp_path / f"{n}.starts")}
        )
        for n in names
    ]
    cfg = {
        "name": "restart",
        "targets": targets,
        "concurrency": LEVELS,
        "repeats": repeats,
        "restart_between_repeats": True,
        "requests_per_level": 4,
        "warmup_requests": 2,
        "warmup_every_level": False,  # a warm-up only after each engine start
        "output_tokens": 4,
        "input_tokens": 8,
        "client_floor": "off",
        **more,
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _engine_starts(tmp_path: Path, name: str = "E") -> int:
    """How many times the engine process started, counted by the engine itself."""
    path = tmp_path / f"{name}.starts"
    return len(path.read_text().split()) if path.exists() else 0


def _url(row: RunRow) -> str:
    """The engine a run measured: each start listens on a port of its own."""
    url: str = row.context["config"]["url"]
    return url


def _warmups(out: Path, row: RunRow) -> int:
    with Store(out / "sweep.db") as store:
        every = len(store.records(row.run_id))
        return every - len(store.records(row.run_id, include_warmup=False))


def test_each_repeat_is_measured_in_its_own_engine_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code = sweep_in(_config(tmp_path), out)
    said = capsys.readouterr()
    assert code == 0, said
    # started twice, by the engine's own count and in the sweep's record of its starts
    assert _engine_starts(tmp_path) == 2
    starts = read_sweep(out)["engine_starts"]
    assert [s["target"] for s in starts] == ["E", "E"]
    assert all(s["stop_s"] is not None for s in starts)  # each stopped, not left up
    # repeat-major: every level of repeat 0, then every level of repeat 1
    runs = db_runs(out)
    assert [r.key for r in runs] == ["E|c=1|r=0", "E|c=2|r=0", "E|c=1|r=1", "E|c=2|r=1"]
    # each repeat on one start, the two repeats on two
    first, second = {_url(r) for r in runs[:2]}, {_url(r) for r in runs[2:]}
    assert len(first) == len(second) == 1 and first != second
    # each start warmed up as a first start is (warm-up only after a start here)
    assert [_warmups(out, r) for r in runs] == [2, 0, 2, 0]
    assert "starts again for repeat 1 (restart_between_repeats)" in said.err
    assert read_sweep(out)["workload"]["restart_between_repeats"] is True


def test_check_says_each_target_starts_once_per_repeat(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, repeats=3)
    assert main(["sweep", "--config", str(config), "--check"]) == 0
    said = capsys.readouterr().out
    assert "note: its engine starts 3 times, once per repeat (restart_between_repeats)" in said
    # the flag sets it too, over a YAML that does not
    cfg = yaml.safe_load(config.read_text())
    cfg.pop("restart_between_repeats")
    config.write_text(yaml.safe_dump(cfg))
    assert main(["sweep", "--config", str(config), "--check"]) == 0
    assert "once per repeat" not in capsys.readouterr().out
    flag = ["sweep", "--config", str(config), "--check", "--restart-between-repeats"]
    assert main(flag) == 0
    assert "its engine starts 3 times" in capsys.readouterr().out


def test_a_resumed_sweep_restarts_only_for_repeats_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert sweep_in(_config(tmp_path, repeats=1), out) == 0, capsys.readouterr()
    assert _engine_starts(tmp_path) == 1
    kept = {r.key: r.run_id for r in db_runs(out)}
    # two repeats more: repeat 0 is kept, and the engine starts once for each new repeat
    assert sweep_in(_config(tmp_path, repeats=3), out) == 0, capsys.readouterr()
    assert _engine_starts(tmp_path) == 3
    runs = db_runs(out)
    assert Counter(r.key for r in runs) == {
        f"E|c={c}|r={r}": 1 for c in LEVELS for r in range(3)
    }  # nothing measured twice
    assert {r.key: r.run_id for r in runs if r.key in kept} == kept
    assert len({_url(r) for r in runs}) == 3, [(r.key, _url(r)) for r in runs]
    assert len(read_sweep(out)["engine_starts"]) == 3
    # all done: the same command starts nothing
    assert sweep_in(_config(tmp_path, repeats=3), out) == 0, capsys.readouterr()
    assert _engine_starts(tmp_path) == 3


def test_a_resume_that_switches_it_is_refused_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Repeats on their own starts and repeats on one start measure different things: a
    sweep resumed with the setting switched (either way) would mix the two in one
    interval, and its sweep.json would say only the second."""
    out = tmp_path / "out"
    assert sweep_in(_config(tmp_path, repeats=1), out) == 0, capsys.readouterr()
    capsys.readouterr()
    plain = _config(tmp_path, repeats=2, restart_between_repeats=False)
    assert sweep_in(plain, out) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "different workload (restart_between_repeats)" in line, line
    assert len(db_runs(out)) == len(LEVELS)  # nothing measured, nothing lost

    other = tmp_path / "other"
    assert sweep_in(plain, other, "--no-restart-between-repeats") == 0, capsys.readouterr()
    capsys.readouterr()
    assert sweep_in(_config(tmp_path, repeats=3), other) == 2
    assert "(restart_between_repeats)" in one_error_line(capsys.readouterr().err)


@pytest.mark.slow
def test_an_interrupted_sweep_resumes_in_the_start_it_needs(tmp_path: Path) -> None:
    """Killed in repeat 1's first level: the resume redoes that level and repeat 1's
    second on one new start, keeps repeat 0 as it was, and starts once more for repeat 2."""
    out = tmp_path / "out"
    slow = {"ttft_ms": 5.0, "itl_ms": 60.0}  # a level of 4 requests of 4 tokens: ~0.8 s
    config = _config(tmp_path, repeats=3, latency=slow)
    argv = crossover_cmd("sweep", "--config", str(config), "--out", str(out), "--no-report")
    first = start_and_interrupt(argv, out, signal.SIGKILL, after_done=2)
    assert first.returncode == -signal.SIGKILL
    before = db_runs(out)
    done = {r.key: r.run_id for r in before if r.status == "done"}
    assert set(done) == {"E|c=1|r=0", "E|c=2|r=0"}
    assert _engine_starts(tmp_path) == 2  # repeat 0's, and repeat 1's that was cut short
    assert sweep_in(config, out) == 0
    assert _engine_starts(tmp_path) == 4  # one for what is left of repeat 1, one for 2
    after = [r for r in db_runs(out) if r.status == "done"]
    assert Counter(r.key for r in after) == {f"E|c={c}|r={r}": 1 for c in LEVELS for r in range(3)}
    assert {r.key: r.run_id for r in after if r.key in done} == done
    by_repeat: dict[str, set[str]] = {}
    for r in after:
        by_repeat.setdefault(r.key.rsplit("|", 1)[1], set()).add(_url(r))
    assert all(len(urls) == 1 for urls in by_repeat.values())
    assert len(set().union(*by_repeat.values())) == 3
    assert len(read_sweep(out)["engine_starts"]) == 4


def test_interleave_stops_every_engine_after_each_repeat(tmp_path: Path) -> None:
    out = tmp_path / "out"
    config = _config(tmp_path, names=("A", "B"), interleave=True)
    assert sweep_in(config, out) == 0
    assert _engine_starts(tmp_path, "A") == _engine_starts(tmp_path, "B") == 2
    # both up for repeat 0 (A first), both again for repeat 1 (B first, as interleave goes)
    starts = read_sweep(out)["engine_starts"]
    assert [s["target"] for s in starts] == ["A", "B", "B", "A"]
    assert all(s["stop_s"] is not None for s in starts)
    runs = db_runs(out)
    assert [r.key for r in runs] == [
        "A|c=1|r=0", "B|c=1|r=0", "A|c=2|r=0", "B|c=2|r=0",
        "B|c=1|r=1", "A|c=1|r=1", "B|c=2|r=1", "A|c=2|r=1",
    ]  # fmt: skip
    for name in ("A", "B"):
        mine = [r for r in runs if r.key and r.key.startswith(name)]
        r0 = {_url(r) for r in mine if r.key and r.key.endswith("r=0")}
        r1 = {_url(r) for r in mine if r.key and r.key.endswith("r=1")}
        assert len(r0) == len(r1) == 1 and r0 != r1


def test_a_url_target_is_refused_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with servers(Linear(2.0, 0.0)) as (url,):
        config = _config(tmp_path)
        cfg = yaml.safe_load(config.read_text())
        cfg["targets"].append({"name": "U", "url": url, "engine": "vllm", "model": "calibration"})
        config.write_text(yaml.safe_dump(cfg))
        out = tmp_path / "out"
        assert sweep_in(config, out) == 2
        line = one_error_line(capsys.readouterr().err)
        assert "restart_between_repeats: target U is a URL" in line, line
        assert not out.exists()  # refused before anything is written
        assert main(["sweep", "--config", str(config), "--check"]) == 2
        assert "target U is a URL" in one_error_line(capsys.readouterr().err)
        # the flag names itself
        argv = [
            "sweep", "--target", f"U={url},engine=vllm,model=calibration",
            "--concurrency", "1", "--output-tokens", "4", "--repeats", "2",
            "--restart-between-repeats", "--out", str(out),
        ]  # fmt: skip
        assert main(argv) == 2
        line = one_error_line(capsys.readouterr().err)
        assert "--restart-between-repeats: target U is a URL" in line, line
    assert _engine_starts(tmp_path) == 0


def test_decide_refuses_it_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, names=("A", "B"))
    out = tmp_path / "out"
    for extra in (["--out", str(out)], ["--check"]):
        assert main(["decide", "--config", str(config), *extra]) == 2
        line = one_error_line(capsys.readouterr().err)
        assert "only where a sign is uncertain" in line, line
        assert "does not restart the engine per repeat" in line
    assert not out.exists()
    assert _engine_starts(tmp_path, "A") == _engine_starts(tmp_path, "B") == 0
