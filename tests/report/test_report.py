from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from crossover.errors import UsageError
from crossover.report import load_sweep, write_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_report_is_self_contained_with_charts_and_files(sweep_dir: Path) -> None:
    out = write_report(sweep_dir, load_sweep(sweep_dir))
    assert out == sweep_dir / "report.html"
    html = out.read_text()
    uris = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(uris) == 4
    assert all(base64.b64decode(u).startswith(PNG_MAGIC) for u in uris)
    for name in ("throughput", "ttft", "itl", "pareto"):
        assert (sweep_dir / "report" / f"{name}.png").read_bytes().startswith(PNG_MAGIC)
    assert "(report/throughput.png)" in html  # the caption: the PNG beside the HTML
    # nothing is fetched from elsewhere
    assert "http://" not in html.replace("http://127.0.0.1", "")
    assert "<link" not in html


def test_report_content(sweep_dir: Path) -> None:
    html = write_report(sweep_dir, load_sweep(sweep_dir), sweep_dir / "x" / "r.html").read_text()
    assert "total tokens/s: llamacpp leads below" in html
    assert "trtllm above" in html
    # every run in the verdict table, the invalid one marked as not used
    assert html.count("<tr") >= 28 + 1
    assert "invalid (not used)" in html
    assert "short_completion" in html
    # engine versions and effective settings
    assert "1.2.1" in html
    assert "cuda_graphs=false" in html
    assert "max_batch_size=128" in html
    # roofline: 16.07 GB at 4.3 TB/s
    assert "roofline 3.74 ms/token" in html
    # telemetry summary from GPU samples
    assert "llamacpp:requests_processing" in html


def test_untrusted_strings_are_escaped(sweep_dir: Path) -> None:
    html = write_report(sweep_dir, load_sweep(sweep_dir)).read_text()
    assert "<script>document" not in html
    assert "<img src=x" not in html
    assert "&lt;script&gt;document.documentElement" in html
    assert "Content-Security-Policy" in html
    # the only <script tokens are none at all: a report runs no code
    assert "<script" not in html.lower()


def test_every_run_lists_the_targets_in_the_sweeps_order(sweep_dir: Path) -> None:
    """The "Every run" table follows the sweep's targets (as its terminal table does), not
    the alphabet (a sweep of fast then batched listed batched first)."""
    sweep = load_sweep(sweep_dir)
    names = sweep.target_names()
    backwards = sweep.model_copy(update={"targets": list(reversed(sweep.targets))})
    html = write_report(sweep_dir, backwards, sweep_dir / "r.html").read_text()
    table = html[html.index('id="verdicts"') :]
    first = [table.index(f"<tr><td>{n}</td>") for n in reversed(names)]
    assert first == sorted(first)
    # and a problem several runs share names them in that order too
    problem = next(p for r in sweep.runs for p in r.problems)
    for r in sweep.runs:
        if r.target == names[0] and not r.problems:
            r.problems.append(problem)
            break
    backwards = sweep.model_copy(update={"targets": list(reversed(sweep.targets))})
    html = write_report(sweep_dir, backwards, sweep_dir / "r.html").read_text()
    problems = html[html.index('id="problems"') : html.index('id="verdicts"')]
    assert f"2 runs: {names[1]} " in problems


def test_the_same_info_in_many_runs_is_one_row_with_a_count(sweep_dir: Path) -> None:
    from crossover.metrics.summary import Problem

    sweep = load_sweep(sweep_dir)
    note = "the engine reported no usage; counted from the stream"
    for run in sweep.runs[:3]:
        run.summary.problems.append(
            Problem(code="warmup_failed", severity="info", count=2, message=note)
        )
    sweep.runs[0].summary.problems.append(
        Problem(
            code="event_too_large", severity="error", count=1, message="an error stays on its own"
        )
    )
    html = write_report(sweep_dir, sweep, sweep_dir / "r.html").read_text()
    problems = html.split('id="problems"', 1)[1].split('id="verdicts"', 1)[0]
    rows = [row for row in problems.split("<tr>") if "warmup_failed" in row]
    assert len(rows) == 1
    assert "3 runs: " in rows[0]
    assert '<td class="num">6</td>' in rows[0]
    assert problems.count("event_too_large") == 1


def test_a_warning_every_run_repeats_is_one_row_whatever_its_figures(sweep_dir: Path) -> None:
    from crossover.metrics.summary import Problem

    sweep = load_sweep(sweep_dir)
    for i, run in enumerate(sweep.runs[:16]):
        run.summary.problems.append(
            Problem(
                code="client_made_percentiles", severity="warning", count=3,
                message=f"itl_ms p99: within reach of the client's loop lag (p99 {3 + i / 10:.1f} ms)",
            )
        )  # fmt: skip
    html = write_report(sweep_dir, sweep, sweep_dir / "r.html").read_text()
    problems = html.split('id="problems"', 1)[1].split('id="verdicts"', 1)[0]
    rows = [row for row in problems.split("<tr>") if "client_made_percentiles" in row]
    assert len(rows) == 1
    assert "16 runs: " in rows[0] and '<td class="num">48</td>' in rows[0]
    assert "(p99 3.0 ms)" in rows[0] and "the first run&#39;s figures" in rows[0]


def test_chart_labels_name_metrics_as_people_do_and_latency_axes_go_log() -> None:
    from crossover.analysis.crossovers import Finding
    from crossover.report.charts import crossover_label, spans_decades

    f = Finding(
        kind="crossover",
        metric="ttft_ms.p50",
        a="A",
        b="B",
        levels=(1, 2, 4),
        below="A",
        above="B",
        concurrency=2.5,
        interval=(2.0, 3.0),
    )
    label = crossover_label(f)
    assert "ttft_ms" not in label
    assert label == "TTFT p50: A → B at 2.5"
    assert spans_decades([20.0, 400.0, 18_000.0])
    assert not spans_decades([20.0, 25.0, 30.0])
    assert not spans_decades([])


def test_a_quality_result_in_the_folder_is_shown_beside_the_speed_results(
    sweep_dir: Path,
) -> None:
    quality = {
        "schema": "crossover.quality/1", "created_at": "2026-12-01T05:25:11+00:00",
        "reference": {"name": "q4_k_m", "url": "http://127.0.0.1:1", "engine": "llamacpp"},
        "prompts": 60, "max_tokens": 200, "top_logprobs": 10, "reference_tokens": 12000,
        "candidates": [{
            "name": "<script>alert(1)</script>", "url": "http://127.0.0.1:2",
            "engine": "llamacpp", "scored_tokens": 12000, "top1_agreement": 0.9701,
            "mean_kl": 0.0711, "kl_tokens": 12000, "first_divergence_p50": 1.0,
            "prompts_diverged": 60, "reanchors": 359, "reanchored": True,
            "interval": {"top1_agreement": [0.9615, 0.9773], "mean_kl": [0.06, 0.0861]},
        }],
        "wall_s": 626.1,
    }  # fmt: skip
    (sweep_dir / "quality.json").write_text(json.dumps(quality))
    html = write_report(sweep_dir, load_sweep(sweep_dir), sweep_dir / "r.html").read_text()
    section = html.split('id="quality"', 1)[1].split("<h2", 1)[0]
    assert "12,000" in section and "97.01% (96.15%-97.73%)" in section
    assert "0.0711 (0.0600-0.0861)" in section
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in section
    # the last column says what it is
    assert "First divergence: over the prompts where the candidate" in section
    (sweep_dir / "quality.json").write_text('{"schema": "something else"}')
    with pytest.raises(UsageError, match=r"not a crossover\.quality/1 file"):
        write_report(sweep_dir, load_sweep(sweep_dir), sweep_dir / "r.html")


def test_no_quality_section_without_a_quality_file(sweep_dir: Path) -> None:
    html = write_report(sweep_dir, load_sweep(sweep_dir), sweep_dir / "r.html").read_text()
    assert 'id="quality"' not in html


def test_throughput_goes_log_when_targets_lie_far_apart_and_crossovers_are_numbered(
    sweep_dir: Path,
) -> None:
    from crossover.analysis.crossovers import Finding
    from crossover.report.charts import Series, targets_apart, throughput_axes

    near = Series([1, 8], [100.0, 800.0], [100.0, 800.0], [100.0, 800.0])
    far = Series([1, 8], [90.0, 80.0], [90.0, 80.0], [90.0, 80.0])
    assert targets_apart([near, far])  # 10x apart at c=8
    assert not targets_apart([near, Series([1, 8], [110.0, 500.0], [0, 0], [0, 0])])
    assert not targets_apart([near])  # one target's own growth is no reason

    def crossing(metric: str, at: float) -> Finding:
        return Finding(
            kind="crossover", metric=metric, a="A", b="B", levels=(1, 2, 4), below="A",
            above="B", concurrency=at, interval=(at * 0.9, at * 1.1),
        )  # fmt: skip

    findings = [
        crossing("total_tokens_per_s", 2.0),
        crossing("total_tokens_per_s", 2.1),
        crossing("output_tokens_per_s", 2.0),  # the same crossing in the other unit
        crossing("ttft_ms.p50", 3.0),
    ]
    _, ax = throughput_axes(load_sweep(sweep_dir), findings)
    numbers = [a for a in ax.texts if a.get_text() in {"1", "2", "3"}]
    captions = [t.get_text() for t in ax.texts if "→" in t.get_text()]
    # only this chart's metric, each with its interval, numbered in order
    assert captions == [
        "1  total tokens/s: A → B at 2 (interval 1.8-2.2)",  # as the terminal writes it
        "2  total tokens/s: A → B at 2.1 (interval 1.9-2.3)",
    ]
    # two points 5% apart: the second number is placed lower, not on top of the first
    (y1, y2) = (n.xyann[1] if hasattr(n, "xyann") else n.get_position()[1] for n in numbers)
    assert y1 != y2


def test_the_workload_reads_as_a_sentence() -> None:
    from crossover.report.html import describe_workload

    w = {"output_tokens": 64, "input_tokens": 128, "endpoint": "completions", "seed": 0,
         "prompts_file": None, "concurrency": [1, 2, 4, 8], "repeats": 3, "name": "demo"}  # fmt: skip
    assert describe_workload(w) == (
        "128-token synthetic prompts, exactly 64 output tokens each, /v1/completions, "
        "seed 0; concurrency 1, 2, 4, 8; 3 repeats per level"
    )
    w = {"output_tokens": 32, "input_tokens": None, "endpoint": "chat", "seed": 1,
         "prompts_file": "sharegpt.json", "sessions": "3 turns, think 0 s",
         "concurrency": None, "rates": [2.0, 4.5], "duration_s_per_level": 30.0,
         "repeats": 1, "slo": "ttft_ms.p99=500", "extra": 7}  # fmt: skip
    text = describe_workload(w)
    assert text.startswith("prompts from sharegpt.json, each its own length, exactly 32")
    assert "sessions 3 turns, think 0 s" in text and "/v1/chat/completions" in text
    assert "arrival rates 2, 4.5 per s; 30 s per level; 1 repeat per level" in text
    assert text.endswith("goodput SLO ttft_ms.p99=500; extra=7")
    assert "=-" not in text and "prompts_file" not in text
    # repeats on their own engine starts say so (the error bars then hold the
    # start-to-start variation), not as a generic key=value
    own = describe_workload({"concurrency": [1, 2], "repeats": 2, "restart_between_repeats": True})
    assert (
        own
        == "synthetic prompts, each its own length; concurrency 1, 2; 2 repeats per level, each on its own engine start"
    )
    # stored as "1 turns" (a sweep keeps its shape as stored); it reads "1 turn"
    one = describe_workload({"sessions": "1 turns, think 0.5 s", "concurrency": [1]})
    assert (
        one == "synthetic prompts, each its own length, sessions 1 turn, think 0.5 s; concurrency 1"
    )


def test_pareto_labels_never_cover_each_other() -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from crossover.analysis import SweepFile
    from crossover.report.charts import pareto_axes

    from ..analysis.synthetic_servers import summary

    runs = []
    for t, scale in (("a", 1.0), ("b", 1.02)):  # two targets nearly on top of each other
        for c in (1, 2, 4, 8, 16):
            s = summary(total=100.0 * c**0.5 * scale, tpot_ms=10.0 * c**0.3, concurrency=c)
            runs.append({"target": t, "concurrency": c, "repeat": 0, "summary": s})
    fig, ax = pareto_axes(SweepFile.model_validate({"runs": runs}))
    renderer = FigureCanvasAgg(fig).get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    assert len(boxes) >= 5
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not a.overlaps(b)


def test_engine_starts_are_shown_per_target(sweep_dir: Path) -> None:
    from crossover.analysis.schema import EngineStart

    sweep = load_sweep(sweep_dir)
    name = sweep.target_names()[0]
    other = sweep.target_names()[1]
    sweep.engine_starts = [
        EngineStart(target=name, started_at="2026-12-05T08:00:00+00:00", ready_s=14.04, stop_s=0.2),
        EngineStart(target=name, started_at="2026-12-05T09:00:00+00:00", ready_s=12.3, stop_s=0.52),
    ]
    html = write_report(sweep_dir, sweep).read_text()
    table = html.split('id="targets"')[1].split('id="problems"')[0]
    row = next(r for r in table.split("<tr>") if r.startswith(f"<td>{name}</td>"))
    assert "ready 12.3-14.0 s (2 starts); stop 0.5 s" in row
    # a target crossover did not start (a URL, or a file from before starts were timed)
    row = next(r for r in table.split("<tr>") if r.startswith(f"<td>{other}</td>"))
    assert "<td>-</td>" in row and "ready" not in row


def test_report_command_analyses_the_sweep_once(
    sweep_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``crossover report`` prints the findings it put in the HTML: one analysis, handed
    to the page (it analysed twice: once inside write_report, again for its lines)."""
    import crossover.analysis
    import crossover.report.html
    from crossover.cli.app import main

    calls = []
    real = crossover.analysis.analyze_sweep

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(crossover.analysis, "analyze_sweep", counted)
    monkeypatch.setattr(crossover.report.html, "analyze_sweep", counted)
    assert main(["report", str(sweep_dir)]) == 0
    assert len(calls) == 1
    out = capsys.readouterr().out
    html = (sweep_dir / "report.html").read_text()
    assert "total tokens/s: llamacpp leads below" in out
    assert "total tokens/s: llamacpp leads below" in html


def test_report_command_reads_the_gc_pauses_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The GC pauses ``crossover report`` prints are the ones in its HTML, read once (a
    committed folder's sweep.db.xz is decompressed for each reading: it read them twice)."""
    import shutil

    import crossover.analysis.gc
    import crossover.report.html
    from crossover.cli.app import main

    freeze = Path(__file__).resolve().parents[2] / "docs" / "results" / "h100" / "sglang-freeze"
    folder = tmp_path / "sglang-freeze"
    folder.mkdir()
    for name in ("sweep.json", "sweep.db.xz"):
        shutil.copyfile(freeze / name, folder / name)
    shutil.copytree(freeze / "engines", folder / "engines")
    calls = []
    real = crossover.analysis.gc.gc_runs

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(crossover.analysis.gc, "gc_runs", counted)
    monkeypatch.setattr(crossover.report.html, "gc_runs", counted)
    assert main(["report", str(folder)]) == 0
    assert len(calls) == 1
    assert capsys.readouterr().out.count("GC pause: sglang c=") == 4
    assert (folder / "report.html").read_text().count("GC pause") >= 4
