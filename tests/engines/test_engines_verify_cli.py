"""``crossover verify-config``: table, mismatches, exit codes, --plan and --json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crossover.engines import LaunchRecord
from crossover.engines.effective import header_line

from .conftest import LOGS

TINY = LOGS / "llama-server-cpu-tiny.log"


def run_cli(argv: list[str]) -> int:
    try:
        from crossover.cli.app import main
    except ModuleNotFoundError as exc:
        # Another engineer's command module may not be in this tree yet: run verify alone.
        if not (exc.name or "").startswith("crossover.cli."):
            raise
        return _verify_only(argv)
    return main(argv)


def _verify_only(argv: list[str]) -> int:
    import sys

    import click
    import typer

    from crossover.cli import verify
    from crossover.errors import CrossoverError

    app = typer.Typer(pretty_exceptions_enable=False)
    verify.register(app)
    app.callback()(lambda: None)
    try:
        app(args=argv, standalone_mode=False)
    except CrossoverError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except click.exceptions.UsageError:
        return 2
    return 0


def test_all_expectations_met_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code = run_cli(["verify-config", str(TINY), "--expect", "parallel_slots=8,threads=2"])
    assert code == 0
    out = capsys.readouterr().out
    assert "parallel_slots" in out
    assert "match" in out


def test_mismatch_exits_3_and_names_the_expectation(capsys: pytest.CaptureFixture[str]) -> None:
    code = run_cli(["verify-config", str(TINY), "--expect", "parallel_slots=4"])
    assert code == 3
    err = " ".join(capsys.readouterr().err.split())  # rich wraps long lines
    assert "parallel_slots: expected 4, got 8" in err


def test_unknown_cuda_graphs_is_not_a_pass(capsys: pytest.CaptureFixture[str]) -> None:
    log = LOGS / "llama-server-cuda-h200-graphs-on.log"
    assert run_cli(["verify-config", str(log), "--expect", "cuda_graphs=on"]) == 3
    assert "not confirmed by the log: cuda_graphs" in " ".join(capsys.readouterr().err.split())
    argv = ["verify-config", str(log), "--expect", "cuda_graphs=on", "--allow-unverified"]
    assert run_cli(argv) == 0


def test_plan_expectations_and_json(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    rec = LaunchRecord(
        engine="llamacpp",
        argv=["llama-server", "-m", "m.gguf", "-np", "64"],
        env={"GGML_CUDA_DISABLE_GRAPHS": "1"},
        port=8080,
        started_at="2026-11-30T09:00:00+00:00",
    )
    log.write_text(header_line(rec) + (LOGS / "llama-server-cuda-h200-graphs-off.log").read_text())
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps({"engine": "llamacpp", "expect": {"cuda_graphs": True, "tp": None, "x": 1}})
    )
    out = tmp_path / "verify.json"
    assert run_cli(["verify-config", str(log), "--plan", str(plan), "--json", str(out)]) == 3
    doc = json.loads(out.read_text())
    assert doc["schema"] == "crossover.verify/1"
    assert doc["ok"] is False
    c, asked = doc["checks"]  # the plan's expectation, then what the launch asked
    assert (c["setting"], c["expected"], c["effective"], c["status"], c["source"]) == (
        "cuda_graphs", True, False, "mismatch", "expect",
    )  # fmt: skip
    assert c["basis"] == "launch-env"
    assert (asked["setting"], asked["expected"], asked["status"], asked["source"]) == (
        "parallel_slots", 64, "match", "launch",
    )  # fmt: skip
    assert doc["warnings"] == []
    assert doc["settings"]["parallel_slots"]["value"] == 64
    assert doc["ignored_plan_keys"] == ["tp", "x"]
    plan.write_text(json.dumps({"expect": {"cuda_graphs": False}}))
    assert run_cli(["verify-config", str(log), "--plan", str(plan)]) == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["verify-config", "/nonexistent/engine.log"],
        ["verify-config", str(TINY), "--expect", "tp"],
        ["verify-config", str(TINY), "--expect", "warp=9"],
        ["verify-config", str(TINY), "--engine", "ollama"],
        ["verify-config", str(TINY), "--plan", "/nonexistent/plan.json"],
    ],
)
def test_bad_input_exits_2(argv: list[str]) -> None:
    assert run_cli(argv) == 2


def test_undetectable_log_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "x.log"
    log.write_text("nothing to see\n")
    assert run_cli(["verify-config", str(log)]) == 2
    assert "--engine" in capsys.readouterr().err


def test_debug_log_confirms_cuda_graphs() -> None:
    log = LOGS / "llama-server-cuda-h200-tiny-graphs-on-lv5.log"
    assert run_cli(["verify-config", str(log), "--expect", "cuda_graphs=on,parallel_slots=4"]) == 0
    off = LOGS / "llama-server-cuda-h200-tiny-graphs-off-lv5.log"
    assert run_cli(["verify-config", str(off), "--expect", "cuda_graphs=on"]) == 3


@pytest.mark.parametrize("text", ["", "INFO: starting\nnothing an engine would say\n"])
def test_a_log_with_nothing_recognized_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    """An empty log (or one no line of which the engine's rules read) is not an empty
    table and a pass: one line saying nothing was recognized, exit 2, no --json written."""
    log = tmp_path / "x.log"
    log.write_text(text)
    out = tmp_path / "v.json"
    assert run_cli(["verify-config", str(log), "--engine", "vllm", "--json", str(out)]) == 2
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    assert "nothing in the log was recognized as vllm's" in err
    assert "effective settings" not in captured.out
    assert not out.exists()
