from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from crossover.cli.report import register
from crossover.errors import UsageError


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def _invoke(*args: str) -> tuple[int, str, BaseException | None]:
    result = CliRunner().invoke(_app(), list(args))
    return result.exit_code, result.output, result.exception


def test_report_command_writes_html_and_prints_findings(sweep_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    code, output, exc = _invoke("report", str(sweep_dir), "--out", str(out))
    assert exc is None, exc
    assert code == 0
    assert out.is_file()
    assert "total tokens/s: llamacpp leads below" in output
    assert "roofline 3.74 ms/token" in output
    assert (tmp_path / "r_files" / "throughput.png").is_file()  # beside the HTML
    assert not (sweep_dir / "report").exists()


def test_report_elsewhere_writes_nothing_into_the_sweep_folder(
    sweep_dir: Path, tmp_path: Path
) -> None:
    """``--out`` elsewhere: the PNGs go beside the HTML, named after it, and the HTML names
    them relative to itself; the sweep's folder (read-only: a committed sweep) is left as
    it was. They went into DIR/report/ whatever --out said."""
    before = sorted(p.name for p in sweep_dir.iterdir())
    out = tmp_path / "elsewhere" / "sweep1.html"
    code, _, exc = _invoke("report", str(sweep_dir), "--out", str(out))
    assert exc is None, exc
    assert code == 0
    assert sorted(p.name for p in sweep_dir.iterdir()) == before
    names = sorted(p.name for p in (out.parent / "sweep1_files").iterdir())
    assert names == ["itl.png", "pareto.png", "throughput.png", "ttft.png"]
    assert "(sweep1_files/throughput.png)" in out.read_text()


@pytest.mark.parametrize(
    ("content", "expect"),
    [
        (None, "no such sweep directory"),
        ("", "no sweep.json"),
        ("{not json", "not readable JSON"),
        ('{"schema": "crossover.run/1"}', "not a sweep file"),
        (
            '{"schema": "crossover.sweep/1", "runs": [{"target": "a"}]}',
            "malformed sweep file: runs.0",
        ),
    ],
)
def test_bad_input_is_a_one_line_usage_error(
    tmp_path: Path, content: str | None, expect: str
) -> None:
    d = tmp_path / "sweep"
    if content is not None:
        d.mkdir()
        if content:
            (d / "sweep.json").write_text(content)
    _code, _, exc = _invoke("report", str(d))
    assert isinstance(exc, UsageError)
    assert exc.exit_code == 2
    assert expect in str(exc)
    assert "\n" not in str(exc)


def test_main_maps_usage_error_to_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from crossover.cli.app import main

    assert main(["report", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert "no such sweep directory" in " ".join(err.split())  # rich wraps long lines
    assert "Traceback" not in err


def _run_summary(total: float, ttft: float, verdict: str = "valid") -> dict[str, object]:
    return {
        "schema": "crossover.run/1",
        "verdict": verdict,
        "problems": [],
        "load": {"mode": "concurrency", "concurrency": 4, "rate_rps": None},
        "throughput": {
            "total_tokens_per_s": total,
            "output_tokens_per_s": total / 2,
            "requests_per_s": 1.0,
        },
        "requests": {"sent": 8, "succeeded": 8, "failed": 0, "matched": 8},
        "ttft_ms": {"p50": ttft, "p99": None},
        "tpot_ms": {},
        "itl_ms": {},
        "chunk_gap_ms": {},
        "e2e_ms": {},
        "queue_ms": {},
        "engine": {"name": "vllm", "url": "http://x", "model": "m", "version": "<b>0.26</b>"},
        "workload": {"input_tokens": 200, "output_tokens": 256, "endpoint": "completions"},
        "started_at": "2026-11-30T09:00:00+00:00",
        "duration_s": 10.0,
    }


def test_compare_two_runs_prints_ratios_and_writes_html(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_run_summary(1000.0, 50.0)))
    b.write_text(json.dumps(_run_summary(1250.0, 40.0, verdict="invalid")))
    html = tmp_path / "cmp.html"
    code, output, exc = _invoke("compare", str(a), str(b), "--html", str(html), "--force")
    assert exc is None, exc
    assert code == 0
    line = next(x for x in output.splitlines() if "total tok/s" in x)
    assert "1,000.0" in line
    assert "1,250.0" in line
    assert "1.250x" in line
    assert "better" in line
    ttft = next(x for x in output.splitlines() if "TTFT p50" in x)
    assert "0.800x" in ttft
    assert "better" in ttft  # lower latency
    assert "verdict invalid" in output
    page = html.read_text()
    assert "&lt;b&gt;0.26&lt;/b&gt;" in page
    assert "<b>0.26" not in page


def test_compare_two_sweeps(sweep_dir: Path) -> None:
    _code, output, exc = _invoke("compare", str(sweep_dir), str(sweep_dir / "sweep.json"))
    assert exc is None, exc
    assert "llamacpp c=16" in output
    assert "1.000x" in output
    assert "invalid or unverified runs left out" in output


def test_compare_mixed_or_missing_is_usage_error(sweep_dir: Path, tmp_path: Path) -> None:
    run = tmp_path / "a.json"
    run.write_text(json.dumps(_run_summary(1.0, 1.0)))
    _, _, exc = _invoke("compare", str(run), str(sweep_dir))
    assert isinstance(exc, UsageError)
    _, _, exc = _invoke("compare", str(run), str(tmp_path / "nope.json"))
    assert isinstance(exc, UsageError)
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "other"}')
    _, _, exc = _invoke("compare", str(run), str(bad))
    assert isinstance(exc, UsageError)
    bad.write_text('{"schema": "crossover.run/1", "verdict": "valid"}')
    _, _, exc = _invoke("compare", str(run), str(bad))
    assert isinstance(exc, UsageError)
    assert "malformed run summary" in str(exc)
    # the run summary is valid: "not one of each" is the right word
    _, _, exc = _invoke("compare", str(run), str(sweep_dir))
    assert "not one of each" in str(exc)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b'{"schema": "crossover.sweep/1", "targ', "not readable JSON"),
        (b"\xff\xfe\x00\xac", "not readable JSON"),
        (b'{"schema": "crossover.sweep/2"}', "not a run summary"),
    ],
)
def test_compare_a_sweep_with_what_is_no_file_of_ours_says_why(
    sweep_dir: Path, tmp_path: Path, content: bytes, needle: str
) -> None:
    """A truncated sweep.json beside a sweep was "not one of each", as if it were a run."""
    bad = tmp_path / "sweep.json"
    bad.write_bytes(content)
    for args in ((str(bad), str(sweep_dir)), (str(sweep_dir), str(bad))):
        _, _, exc = _invoke("compare", *args)
        assert isinstance(exc, UsageError)
        assert str(exc).startswith(f"{bad}: {needle}"), exc


@pytest.mark.parametrize(
    ("b_verdict", "b_input", "code", "needles"),
    [
        ("invalid", 200, 3, ["b.json is invalid, not valid"]),
        ("unverified", 200, 3, ["b.json is unverified"]),
        ("valid", 100, 2, ["input_tokens 200 vs 100"]),
        ("invalid", 100, 3, ["b.json is invalid", "input_tokens 200 vs 100"]),
    ],
)
def test_compare_refuses_what_is_not_comparable(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    b_verdict: str,
    b_input: int,
    code: int,
    needles: list[str],
) -> None:
    from crossover.cli.app import main

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_run_summary(1000.0, 50.0)))
    other = _run_summary(1500.0, 40.0, verdict=b_verdict)
    other["workload"] = {"input_tokens": b_input, "output_tokens": 256, "endpoint": "completions"}
    b.write_text(json.dumps(other))
    assert main(["compare", str(a), str(b)]) == code
    captured = capsys.readouterr()
    assert "1.500x" not in captured.out  # no ratio is printed
    line = " ".join(captured.err.split())
    assert line.startswith("error: not comparable:")
    assert "--force" in line
    for needle in needles:
        assert needle in line
    assert main(["compare", str(a), str(b), "--force"]) == 0
    out = capsys.readouterr().out
    assert "1.500x" in out
    assert "note:" in out


def test_compare_sweeps_with_different_work_is_refused(sweep_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    data = json.loads((sweep_dir / "sweep.json").read_text())
    data["workload"] = {**(data.get("workload") or {}), "output_tokens": 7}
    (other / "sweep.json").write_text(json.dumps(data))
    first = json.loads((sweep_dir / "sweep.json").read_text())
    if "output_tokens" not in (first.get("workload") or {}):
        first["workload"] = {**(first.get("workload") or {}), "output_tokens": 64}
        (sweep_dir / "sweep.json").write_text(json.dumps(first))
    _, _, exc = _invoke("compare", str(sweep_dir), str(other))
    assert isinstance(exc, UsageError)
    assert "output_tokens" in str(exc)
    code, _, exc = _invoke("compare", str(sweep_dir), str(other), "--force")
    assert exc is None and code == 0


def test_report_prints_the_findings_as_the_sweep_did(
    sweep_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``crossover report DIR`` repeats the sweep's findings block (its headings, the
    headline metrics without a crossover, the notes), not another selection of them
    (before: the crossovers and every inconclusive metric, without headings, so a
    report printed lines the sweep had not and left out leads it had printed)."""
    from rich.console import Console

    from crossover.analysis import analyze_sweep
    from crossover.cli.app import main
    from crossover.cli.sweep import print_outcome
    from crossover.report import load_sweep
    from crossover.sweep.driver import SweepOutcome

    sweep = load_sweep(sweep_dir)
    print_outcome(SweepOutcome(sweep, analyze_sweep(sweep), 1, 0), sweep_dir, Console(), False)
    swept = capsys.readouterr().out.splitlines()
    assert main(["report", str(sweep_dir)]) == 0
    reported = capsys.readouterr().out.splitlines()
    start = next(i for i, x in enumerate(swept) if x.startswith("crossovers (who leads"))
    end = next(i for i, x in enumerate(swept) if x.startswith("results: "))
    block = swept[start:end]
    assert reported[: len(block)] == block
    assert reported[-1].startswith("report: ")


def test_a_sweep_of_one_repeat_says_what_its_intervals_rest_on(sweep_dir: Path) -> None:
    from crossover.analysis import analyze_sweep
    from crossover.report import load_sweep
    from crossover.report.text import findings_lines

    sweep = load_sweep(sweep_dir)
    note = "one repeat per level: the intervals rest on an assumed 3% run-to-run noise"
    assert not any(note in x for x in findings_lines(sweep, analyze_sweep(sweep)))
    firsts = sweep.model_copy(update={"runs": [r for r in sweep.runs if r.repeat == 0]})
    assert any(note in x for x in findings_lines(firsts, analyze_sweep(firsts)))


def test_a_sweep_stopped_before_its_first_level_says_so(tmp_path: Path) -> None:
    """A sweep interrupted in its first level leaves sweep.db alone: it was asked whether
    the folder is a sweep's --out at all."""
    (tmp_path / "sweep.db").write_bytes(b"")
    _, _, exc = _invoke("report", str(tmp_path))
    assert isinstance(exc, UsageError)
    assert "no sweep.json yet beside its sweep.db" in str(exc)
    assert "resumes it" in str(exc)


def test_compare_a_sweep_without_targets_says_so(sweep_dir: Path, tmp_path: Path) -> None:
    """It was "no target in common:  vs a, b" (an empty list before the "vs")."""
    empty = tmp_path / "sweep.json"
    empty.write_text('{"schema": "crossover.sweep/1"}')
    _, _, exc = _invoke("compare", str(empty), str(sweep_dir))
    assert isinstance(exc, UsageError)
    assert str(exc) == f"{empty}: the sweep holds no target (no run in it)"
