"""Output that fits its reader: piped output is not broken at 80 columns nor cut (``0.…``),
verify-config shows a shared log line once and no regular expression, Ctrl-C on ``run``
promises no resume, a sweep refused once running leaves no sweep.db, and summarize names
each run's target."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crossover.calibration.config import CalibrationConfig
from crossover.calibration.server import spawn
from crossover.cli.app import main

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "fixtures" / "logs"


def test_calibrate_piped_shows_every_cell_whole(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["calibrate", "--concurrency", "1,4", "--output-tokens", "16", "--itl-ms", "2",
               "--no-cache"])  # fmt: skip
    assert rc == 0
    out = capsys.readouterr().out
    assert "…" not in out  # at 80 columns rich cut the cells to "0.…"
    header = next(ln for ln in out.splitlines() if "deliv p50" in ln)
    assert "server lag mean" in header  # every column on the header's one line


def test_run_piped_keeps_each_line_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with spawn(CalibrationConfig(ttft_ms=2.0, itl_ms=1.0)) as url:
        rc = main(["run", "--url", url, "--model", "calibration", "--concurrency", "2",
                   "--requests", "8", "--output-tokens", "8", "--quiet",
                   "--out", str(tmp_path / "r")])  # fmt: skip
    assert rc == 0
    out = capsys.readouterr().out
    assert "requests 8 sent, 8 ok, 0 failed, 8 matched" in out  # once broken after "0"
    assert any(ln.startswith("concurrency 2 (achieved") and "steady window" in ln
               for ln in out.splitlines())  # fmt: skip


def test_verify_config_shows_a_shared_line_once_and_no_regex(
    capsys: pytest.CaptureFixture[str],
) -> None:
    main(["verify-config", str(LOGS / "vllm-0.26-h200-vllm-eager.log")])
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.startswith("│")]
    assert sum("line 25: " in r for r in rows) == 1  # the engine's config line, once
    assert sum("line 25 (as for context_tokens)" in r for r in rows) >= 5
    multicast = next(r for r in rows if r.startswith("│ multicast"))
    assert "no line matching" not in multicast and "(?:" not in multicast and "\\|" not in out
    assert "the log never shows it, though it would by then" in multicast


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("parent", ["terminal", "script-background"])
def test_ctrl_c_on_run_promises_no_resume(tmp_path: Path, parent: str) -> None:
    """``script-background``: started as `crossover run ... &` from a shell script, which
    leaves SIGINT ignored; `kill -INT` must still stop it the same way."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    pre = _ignore_sigint if parent == "script-background" else None
    with spawn(CalibrationConfig(ttft_ms=2.0, itl_ms=20.0)) as url:
        proc = subprocess.Popen(
            [sys.executable, "-m", "crossover", "run", "--url", url, "--model", "calibration",
             "--concurrency", "2", "--requests", "400", "--output-tokens", "64", "--quiet",
             "--out", str(tmp_path / "r")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, preexec_fn=pre,
        )  # fmt: skip
        try:
            db = tmp_path / "r" / "results.db"
            deadline = time.monotonic() + 30
            while not db.exists():
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline
                time.sleep(0.1)
            time.sleep(1.0)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130
    assert "interrupted" in err
    assert "resume" not in err.replace("does not resume", "")
    assert "a run does not resume" in err


def test_a_sweep_refused_once_running_leaves_no_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A prompt file to fit to --input-tokens needs a tokenizer; the sglang dialect has no
    /tokenize to ask, which shows only when the first level builds its prompts."""
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "hello there"}\n')
    config = tmp_path / "s.yaml"
    out = tmp_path / "out"
    with spawn(CalibrationConfig(ttft_ms=2.0, itl_ms=1.0)) as url:
        config.write_text(
            f"concurrency: [1]\noutput_tokens: 4\ninput_tokens: 16\nprompts_file: {prompts}\n"
            f"targets:\n  - {{name: a, url: '{url}', engine: sglang, model: calibration}}\n"
        )
        assert main(["sweep", "--config", str(config), "--out", str(out)]) == 2
    assert "needs a tokenizer" in capsys.readouterr().err
    assert not (out / "sweep.db").exists()
    assert not out.exists()


def test_summarize_names_each_runs_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sweep"
    with (
        spawn(CalibrationConfig(ttft_ms=2.0, itl_ms=1.0)) as a,
        spawn(CalibrationConfig(ttft_ms=4.0, itl_ms=1.0)) as b,
    ):
        rc = main(["sweep", "--target", f"fast={a},engine=vllm,model=calibration",
                   "--target", f"slow={b},engine=vllm,model=calibration", "--concurrency", "1",
                   "--requests-per-level", "4", "--output-tokens", "4", "--out", str(out),
                   "--no-report"])  # fmt: skip
    assert rc == 0
    capsys.readouterr()
    summaries = tmp_path / "s.json"
    assert main(["summarize", str(out / "sweep.db"), "--json", str(summaries)]) == 0
    printed = capsys.readouterr().out
    assert "fast c=1 r=0  (run " in printed and "slow c=1 r=0  (run " in printed
    assert {s["target"] for s in json.loads(summaries.read_text())} == {"fast", "slow"}
