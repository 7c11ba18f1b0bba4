"""``crossover run`` end to end against a calibration server in its own process: the
witnesses it finds by itself (the server's /tokenize, its /metrics), the problems and
failed warm-up in the terminal and the JSON, and the timeouts' help."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from crossover.calibration.config import CalibrationConfig, parse_fault
from crossover.calibration.server import spawn
from crossover.cli.app import main
from tests.errlines import one_line_error


def run_cli(url: str, tmp_path: Path, *extra: str) -> tuple[int, dict[str, object]]:
    summary = tmp_path / "run.json"
    rc = main(
        ["run", "--url", url, "--model", "calibration", "--engine", "vllm",
         "--concurrency", "4", "--requests", "16", "--output-tokens", "12",
         "--input-tokens", "20", "--quiet", "--out", str(tmp_path / "res"),
         "--json", str(summary), *extra]
    )  # fmt: skip
    return rc, orjson.loads(summary.read_bytes())


@pytest.mark.parametrize("workers", ["1", "2"])
def test_inflated_usage_is_caught_without_being_told_how(
    tmp_path: Path, workers: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """No --tokenizer, no --metrics-url: the tool finds the server's /tokenize and
    /metrics itself, and both contradict the usage."""
    with spawn(
        CalibrationConfig(ttft_ms=2.0, itl_ms=1.0, faults=[parse_fault("usage_inflated")])
    ) as url:
        rc, s = run_cli(url, tmp_path, "--workers", workers, "--warmup", "0")
    assert rc == 3
    assert s["verdict"] == "invalid"
    problems = {p["code"]: p["severity"] for p in s["problems"]}  # type: ignore[attr-defined]
    assert problems["text_tokens_mismatch"] == "error"
    assert problems["engine_tokens_mismatch"] == "error"
    w = s["witnesses"]
    assert w["output_tokens"] == {  # type: ignore[index]
        "usage": 16 * 12, "stream_chunks": 16 * 6, "stream_text": 16 * 6,
        "stream_text_requests": 16, "logprobs": None, "logprobs_requests": 0,
    }  # fmt: skip
    asked = {c["witness"]: (c["asked"], c["agreed"]) for c in w["checks"]}  # type: ignore[index]
    assert asked["stream_text"] == (16, 0) and asked["engine_counter"] == (1, 0)
    assert w["prompt_tokens"] == {"usage": 16 * 20, "prompts": 16 * 20}  # type: ignore[index]
    out = capsys.readouterr().out
    assert "text_tokens_mismatch" in out and "engine_tokens_mismatch" in out


def test_failed_warmup_shows_in_the_terminal_and_the_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    faults = [parse_fault("http_500:0.25")]
    with spawn(CalibrationConfig(ttft_ms=2.0, itl_ms=1.0, faults=faults)) as url:
        rc, s = run_cli(url, tmp_path, "--warmup", "4", "--allowed-failures", "4",
                        "--metrics-url", "off")  # fmt: skip
    assert rc == 0
    assert s["requests"]["warmup"] == 4 and s["requests"]["warmup_failed"] == 1  # type: ignore[index]
    assert s["witnesses"]["engine"] is None  # type: ignore[index]
    out = capsys.readouterr().out
    assert "warm-up 4, 1 failed" in out
    assert "warning warmup_failed" in out and "HTTP 500" in out


def test_warmup_level_is_one_wave_of_the_concurrency(tmp_path: Path) -> None:
    """``--warmup level``: as many warm-up requests as ``--concurrency`` (the default stops
    at 16), all in flight at once."""
    with spawn(CalibrationConfig(ttft_ms=2.0, itl_ms=1.0)) as url:
        rc, s = run_cli(url, tmp_path, "--concurrency", "24", "--requests", "24",
                        "--warmup", "level", "--metrics-url", "off")  # fmt: skip
    assert rc == 0
    assert s["requests"]["warmup"] == 24  # type: ignore[index]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_warmup_output_tokens_shortens_the_warm_up_only(tmp_path: Path, workers: str) -> None:
    """``--warmup-output-tokens 3``: the warm-up asks for 3 tokens (in worker processes
    too), the measured requests for 12; the engine's counter, which saw both, agrees, and
    the run is valid."""
    from crossover.records.store import Store

    with spawn(CalibrationConfig(ttft_ms=2.0, itl_ms=1.0)) as url:
        rc, s = run_cli(url, tmp_path, "--warmup", "level", "--warmup-output-tokens", "3",
                        "--workers", workers)  # fmt: skip
    assert rc == 0 and s["verdict"] == "valid", s["problems"]
    asked = {c["witness"]: (c["asked"], c["agreed"]) for c in s["witnesses"]["checks"]}  # type: ignore[index]
    assert asked["engine_counter"] == (1, 1)
    with Store(tmp_path / "res" / "results.db") as store:
        (run,) = store.runs()
        records = store.records(run.run_id)
    warm = {(r.expected_output_tokens, r.completion_tokens) for r in records if r.warmup}
    assert warm == {(3, 3)}
    assert sum(r.warmup for r in records) == 4
    assert {r.completion_tokens for r in records if not r.warmup} == {12}


def test_timeouts_say_what_they_cover(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    assert main(["run", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())  # the help wraps at 80 columns or fewer
    assert "until the first chunk carrying generated text" in text
    assert "the TCP (and TLS) connect" in text
    assert "--max-event-bytes" in text and "--metrics-url" in text


def test_run_takes_the_slo_syntax_capacity_takes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One SLO syntax: run judges each METRIC.STAT=LIMIT term against the run and counts a
    request as goodput when it meets each per-request limit (today: refused as 'unknown
    SLO')."""
    with spawn(CalibrationConfig(ttft_ms=2.0, itl_ms=1.0)) as url:
        rc, s = run_cli(url, tmp_path, "--slo", "ttft_ms.p99=5000,e2e_ms.p50=0.001")
    assert rc == 0
    goodput = s["goodput"]
    assert goodput["slo"] == {"ttft_ms": 5000.0, "e2e_ms": 0.001}  # type: ignore[index]
    assert goodput["fraction"] == 0.0  # type: ignore[index]  # nothing ends in 1 us
    out = capsys.readouterr().out
    assert "SLO ttft_ms.p99<=5000: meets" in out
    assert "SLO e2e_ms.p50<=0.001: misses" in out


def test_the_transport_is_chosen_and_recorded(tmp_path: Path) -> None:
    with spawn(CalibrationConfig(ttft_ms=2.0, itl_ms=1.0)) as url:
        rc, s = run_cli(url, tmp_path, "--transport", "lean", "--workers", "2", "--warmup", "0")
    assert rc == 0, s["problems"]
    assert s["load"]["transport"] == "lean"  # type: ignore[index]
    assert main(["run", "--url", url, "--model", "m", "--concurrency", "1", "--output-tokens",
                 "4", "--transport", "curl", "--out", str(tmp_path / "x")]) == 2  # fmt: skip


@pytest.mark.parametrize("where", ["--db", "default"])
def test_a_db_that_is_not_sqlite_is_refused_before_any_request(
    counting_server: tuple[str, list[str]],
    tmp_path: Path,
    where: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--db notes.txt`` (or ``OUT/results.db`` that is some other file) is one line,
    exit 2, before the server is contacted, and the file is left as it was: it was
    found only once the server had been probed."""
    url, hits = counting_server
    out = tmp_path / "res"
    out.mkdir()
    db = tmp_path / "notes.txt" if where == "--db" else out / "results.db"
    db.write_text("my notes\n")
    more = ["--db", str(db)] if where == "--db" else []
    rc = main(["run", "--url", url, "--model", "m", "--concurrency", "1", "--requests", "1",
               "--output-tokens", "4", "--quiet", "--out", str(out), *more])  # fmt: skip
    assert rc == 2
    assert f"{db}: not a crossover results database" in one_line_error(capsys)
    assert hits == []
    assert db.read_text() == "my notes\n"
    assert sorted(p.name for p in db.parent.iterdir()) == sorted(
        [db.name, *(["res"] if where == "--db" else [])]
    )


def test_a_db_that_is_a_folder_is_refused_before_any_request(
    counting_server: tuple[str, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, hits = counting_server
    rc = main(["run", "--url", url, "--model", "m", "--concurrency", "1", "--requests", "1",
               "--output-tokens", "4", "--quiet", "--out", str(tmp_path / "res"),
               "--db", str(tmp_path)])  # fmt: skip
    assert rc == 2
    assert "a folder, not a results database file" in one_line_error(capsys)
    assert hits == []


def test_the_json_says_the_machine_it_was_measured_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import os

    from crossover.metrics.host import HostFacts, HostGpu
    from crossover.metrics.summary import RunSummary
    from crossover.report.compare import compare_runs

    with spawn(CalibrationConfig(ttft_ms=2.0, itl_ms=1.0)) as url:
        rc, s = run_cli(url, tmp_path, "--warmup", "0")
    assert rc == 0
    host = HostFacts.model_validate(s["host"])
    assert host.cpus == os.cpu_count() and host.crossover and host.python
    # two runs from different kinds of machine: compare says so
    a = RunSummary.model_validate(s)
    b = a.model_copy(update={"host": HostFacts(seen_at="t", gpus=[HostGpu(name="NVIDIA H200")])})
    notes = compare_runs(a, b).notes
    assert any(n.startswith("machines differ: A on ") and "B on 1x NVIDIA H200" in n for n in notes)
    assert not any("machines differ" in n for n in compare_runs(a, a).notes)


def test_the_server_s_version_is_kept_with_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A URL's server answers its version (vLLM's ``GET /version``): the run keeps it."""
    from crossover.records.store import Store

    with spawn(CalibrationConfig(ttft_ms=1.0, itl_ms=0.5, version="0.26.0")) as url:
        rc, _ = run_cli(url, tmp_path)
    assert rc == 0
    assert f"vllm 0.26.0 @ {url}" in capsys.readouterr().out  # the summary's header
    with Store(tmp_path / "res" / "results.db", read_only=True) as store:
        (run,) = store.runs()
    assert run.context["context"]["engine"]["version"] == "0.26.0"
