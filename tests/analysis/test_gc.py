"""``crossover.analysis.gc``: SGLang's logged long garbage collections tied to the runs
whose measured window they met, on the committed H100 results (docs/results/h100/sglang-gc:
its sweep.db.xz unpacked, its engine log as committed), then on that log with its clock
moved to another zone, without its launch header, and a folder without a database; the
lines ``crossover report`` prints and the HTML report's section and row tags."""

from __future__ import annotations

import gzip
import lzma
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from crossover.analysis.gc import format_gc_runs, gc_runs, run_windows
from crossover.report import load_sweep
from crossover.report.html import write_report
from crossover.report.text import findings_lines

RESULTS = Path(__file__).parents[2] / "docs" / "results" / "h100" / "sglang-gc"


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The committed sweep with its database unpacked, as a live sweep folder holds it."""
    out = tmp_path_factory.mktemp("sglang-gc")
    (out / "sweep.db").write_bytes(lzma.decompress((RESULTS / "sweep.db.xz").read_bytes()))
    shutil.copy(RESULTS / "sweep.json", out / "sweep.json")
    (out / "engines").mkdir()
    shutil.copy(RESULTS / "engines" / "sglang.log.gz", out / "engines" / "sglang.log.gz")
    return out


def _tied(folder: Path) -> list[tuple[int, int, list[int], list[bool]]]:
    return [
        (int(x.level), x.repeat, [p.line for p in x.pauses], list(x.inside))
        for x in gc_runs(folder, load_sweep(folder))
    ]


#: the committed log's six collections at 11:58:30 (startup), :55, :59:04, :27, :38, :48;
#: the measured windows c=64 r0 11:58:39.0-51.8, c=256 r0 :54.7-:59:18.4, c=64 r1
#: :20.8-:34.0, c=256 r1 :36.8-12:00:00.1
EXPECTED = [
    (64, 1, [1794], [True]),
    (256, 0, [912, 1224], [False, True]),  # 11:58:55, 0.53 s: may have begun before 54.66
    (256, 1, [2659, 2966], [True, True]),
]


def test_the_committed_sweep_ties_its_collections_to_their_runs(sweep_dir: Path) -> None:
    windows = {(int(w.level.value), w.repeat): w for w in run_windows(sweep_dir / "sweep.db")}
    assert len(windows) == 4
    first = windows[(256, 0)]
    assert first.start.strftime("%H:%M:%S") == "11:58:54"
    assert 23.6 < (first.end - first.start).total_seconds() < 23.9  # its summary: 23.74 s
    assert _tied(sweep_dir) == EXPECTED


def test_the_line_says_the_pause_where_it_fell_and_what_it_means(sweep_dir: Path) -> None:
    lines = format_gc_runs(gc_runs(sweep_dir, load_sweep(sweep_dir)))
    assert lines[1] == (
        "sglang c=256 (repeat 0): 2 garbage collections in SGLang's front end met this run's "
        "measured window: 0.53 s, ending 0.3-1.3 s into it (sglang.log.gz line 912, at its "
        "edge: the log stamps whole seconds); 0.60 s, ending 9.3-10.3 s into it "
        "(sglang.log.gz line 1224): every request in flight waited it out"
    )


def _rewrite(sweep_dir: Path, tmp_path: Path, change: Callable[[str], str]) -> Path:
    folder = tmp_path / "sweep"
    shutil.copytree(sweep_dir, folder)
    log = folder / "engines" / "sglang.log.gz"
    text = gzip.decompress(log.read_bytes()).decode("utf-8", errors="replace")
    log.write_bytes(gzip.compress(change(text).encode()))
    return folder


def _two_hours_ahead(text: str) -> str:
    def shift(m: re.Match[str]) -> str:
        return f"[2026-12-06 {int(m.group(1)) + 2:02d}:{m.group(2)}]"

    return re.sub(r"^\[2026-12-06 (\d\d):(\d\d:\d\d)\]", shift, text, flags=re.MULTILINE)


def test_a_log_in_another_zone_ties_the_same_runs(sweep_dir: Path, tmp_path: Path) -> None:
    """The engine's host at UTC+2: its stamps read two hours ahead of the launch header."""
    folder = _rewrite(sweep_dir, tmp_path, _two_hours_ahead)
    text = gzip.decompress((folder / "engines" / "sglang.log.gz").read_bytes()).decode()
    assert "[2026-12-06 13:58:55] LONG GARBAGE" in text
    assert _tied(folder) == EXPECTED


def test_a_log_without_the_launch_header_ties_nothing(sweep_dir: Path, tmp_path: Path) -> None:
    folder = _rewrite(sweep_dir, tmp_path, lambda t: t.split("\n", 1)[1])
    assert _tied(folder) == []


def test_a_folder_without_its_database_ties_nothing(sweep_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "sweep"
    shutil.copytree(sweep_dir, folder)
    (folder / "sweep.db").unlink()
    assert _tied(folder) == []


def test_report_prints_them_and_the_html_tags_their_rows(sweep_dir: Path, tmp_path: Path) -> None:
    sweep = load_sweep(sweep_dir)
    lines = [ln for ln in findings_lines(sweep, [], sweep_dir=sweep_dir) if "GC pause" in ln]
    assert len(lines) == 3 and lines[0].startswith("[bold yellow]GC pause:[/] sglang c=64")
    assert not [ln for ln in findings_lines(sweep, []) if "GC pause" in ln]  # no folder given
    html = write_report(sweep_dir, sweep, tmp_path / "r.html").read_text()
    assert '<h2 id="gc-pause">Long garbage collections</h2>' in html
    assert html.count('<span class="overloaded">GC pause</span>') == 3
    assert "SGLang&#39;s front end met this run&#39;s measured window" in html  # escaped


FROZEN = RESULTS.parent / "moe-open-decide-freeze"


def test_no_freeze_in_the_log_no_frozen_pause(sweep_dir: Path) -> None:
    runs = gc_runs(sweep_dir, load_sweep(sweep_dir))
    assert runs and not any(x.frozen or any(p.frozen for p in x.pauses) for x in runs)


def test_a_pause_after_a_freeze_the_log_shows_is_frozen(sweep_dir: Path, tmp_path: Path) -> None:
    """A ``POST /freeze_gc`` answered 200 (the LONG_GC rule's context) makes every later
    pause frozen, not the earlier ones; a run is frozen where all that met it were."""
    freeze = '[2026-12-06 11:59:00] INFO:     127.0.0.1:1 - "POST /freeze_gc HTTP/1.1" 200 OK'

    def after_line_1224(text: str) -> str:
        lines = text.split("\n")
        return "\n".join([*lines[:1224], freeze, *lines[1224:]])

    folder = _rewrite(sweep_dir, tmp_path, after_line_1224)
    runs = {(int(x.level), x.repeat): x for x in gc_runs(folder, load_sweep(folder))}
    assert [p.frozen for p in runs[(256, 0)].pauses] == [False, False]
    assert not runs[(256, 0)].frozen
    assert runs[(64, 1)].frozen and runs[(256, 1)].frozen
    (line,) = format_gc_runs([runs[(64, 1)]])
    assert line.startswith(
        "sglang c=64 (repeat 1): a garbage collection in SGLang's front end, its collector "
        "frozen, met this run's measured window: "
    )


def test_the_committed_frozen_decision_has_its_pauses_frozen() -> None:
    """docs/results/h100/moe-open-decide-freeze: SGLang with freeze_gc: true; its two
    collections of 0.05-0.06 s (log lines 4090, 4257) came after /freeze_gc answered."""
    (run,) = gc_runs(FROZEN, load_sweep(FROZEN))
    assert (run.target, run.level, run.repeat) == ("sglang", 20.0, 1)
    assert [(p.line, p.frozen) for p in run.pauses] == [(4090, True), (4257, True)]
    assert run.frozen
    (line,) = format_gc_runs([run])
    assert "2 garbage collections in SGLang's front end, its collector frozen, met " in line
