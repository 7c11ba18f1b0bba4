"""Engine starts: a launched target's time to ready and its stop, kept in the sweep's
database as they happen (``engine_starts``), in sweep.json, in the target's info and in
the sweep's own lines; a resume that starts the engine again adds a start, one that
starts nothing adds none."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from crossover.analysis.schema import EngineStart
from crossover.records.store import Store

from .conftest import calib_engine_target, read_sweep, sweep_in

LOAD_S = 1.5


def _config(tmp_path: Path, levels: list[int]) -> Path:
    target = calib_engine_target(tmp_path, "E", env={"CALIB_ENGINE_LOAD_S": str(LOAD_S)})
    cfg = {
        "name": "starts",
        "targets": [target],
        "concurrency": levels,
        "requests_per_level": 4,
        "warmup_requests": 0,
        "output_tokens": 4,
        "input_tokens": 8,
        "client_floor": "off",
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_a_start_is_timed_kept_and_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert sweep_in(_config(tmp_path, [1, 2]), out) == 0
    said = capsys.readouterr()
    assert "E: healthy at http://127.0.0.1:" in said.out + said.err
    assert "s after its start)" in said.out + said.err
    sweep = read_sweep(out)
    (start,) = [EngineStart.model_validate(s) for s in sweep["engine_starts"]]
    assert start.target == "E" and start.replicas == 1
    # it cannot be ready before the model has loaded, and a 1.5 s load is no minute
    assert LOAD_S <= start.ready_s < LOAD_S + 20
    assert start.stop_s is not None and 0 <= start.stop_s < 15
    (info,) = sweep["targets"]
    assert info["ready_s"] == start.ready_s and info["started_at"] == start.started_at
    # the database holds it too (sweep.json is made from it)
    with Store(out / "sweep.db") as store:
        assert store.get_meta("engine_starts") == sweep["engine_starts"]


def test_resume_adds_a_start_only_when_it_starts_the_engine(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert sweep_in(_config(tmp_path, [1]), out) == 0
    # everything done: nothing started, nothing added
    assert sweep_in(_config(tmp_path, [1]), out) == 0
    assert len(read_sweep(out)["engine_starts"]) == 1
    # a level more: the engine starts again, the first start stays as it was
    first = read_sweep(out)["engine_starts"][0]
    assert sweep_in(_config(tmp_path, [1, 2]), out) == 0
    starts = read_sweep(out)["engine_starts"]
    assert len(starts) == 2 and starts[0] == first
    assert starts[1]["started_at"] >= first["started_at"]
    assert all(s["stop_s"] is not None for s in starts)


def test_a_url_target_has_no_starts(tmp_path: Path) -> None:
    from .conftest import Linear, servers

    with servers(Linear(2.0, 0.5)) as urls:
        cfg = {
            "name": "url",
            "targets": [{"name": "U", "url": urls[0], "engine": "vllm", "model": "calibration"}],
            "concurrency": [1],
            "requests_per_level": 4,
            "warmup_requests": 0,
            "output_tokens": 4,
            "input_tokens": 8,
            "client_floor": "off",
        }
        path = tmp_path / "sweep.yaml"
        path.write_text(yaml.safe_dump(cfg))
        assert sweep_in(path, tmp_path / "out") == 0
    sweep = read_sweep(tmp_path / "out")
    assert sweep["engine_starts"] == []
    assert sweep["targets"][0]["ready_s"] is None
