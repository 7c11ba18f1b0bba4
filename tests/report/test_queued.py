"""The open-loop levels whose engine kept requests waiting (``crossover.analysis.kv``,
queued) are shown where a sweep's results are read: the HTML report (escaped), the
findings lines; on the committed H100 open-loop decision, SGLang at 20 requests/s."""

from __future__ import annotations

import json
from pathlib import Path

from rich.text import Text

from crossover.report import load_sweep, write_report
from crossover.report.text import findings_lines

FOLDER = Path(__file__).resolve().parents[2] / "docs/results/h100/moe-open-decide-freeze"
#: a target name a sweep file could carry, with markup in it
EVIL = "<script>alert(1)</script>"


def _copy(tmp_path: Path, name: str = "sglang") -> Path:
    """The folder's sweep.json alone (no database, no logs), SGLang renamed ``name``."""
    out = tmp_path / "sweep"
    out.mkdir()
    data = json.loads((FOLDER / "sweep.json").read_text())
    for t in data["targets"]:
        if t["name"] == "sglang":
            t["name"] = name
    for r in data["runs"]:
        if r["target"] == "sglang":
            r["target"] = name
    (out / "sweep.json").write_text(json.dumps(data))
    return out


def _section(html: str) -> str:
    return html.split('id="queued"', 1)[1].split("<h2", 1)[0]


def test_the_report_shows_the_queued_levels(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    html = write_report(folder, load_sweep(folder)).read_text()
    section = _section(html)
    assert "requests waited to be admitted while arrivals kept coming" in section
    row = '<tr><td>sglang</td><td>rate=20</td><td class="num">0</td><td class="num">25</td>'
    assert row + '<td class="num">5</td><td class="num">255</td><td class="num">256</td>' in section
    assert section.count("<tr><td>sglang</td><td>rate=20</td>") == 2
    assert "<td>vllm</td>" not in section
    # and on the runs' own rows
    assert html.count('<span class="overloaded">queued</span>') == 2


def test_a_report_without_a_queue_has_no_section(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    data = json.loads((folder / "sweep.json").read_text())
    for r in data["runs"]:
        r["server_metrics"] = None
    (folder / "sweep.json").write_text(json.dumps(data))
    html = write_report(folder, load_sweep(folder)).read_text()
    assert 'id="queued"' not in html and '<span class="overloaded">queued</span>' not in html


def test_a_target_name_with_markup_is_escaped_in_the_section(tmp_path: Path) -> None:
    folder = _copy(tmp_path, EVIL)
    html = write_report(folder, load_sweep(folder)).read_text()
    assert "<script" not in html.lower()
    assert "<td>&lt;script&gt;alert(1)&lt;/script&gt;</td><td>rate=20</td>" in _section(html)


def test_the_findings_lines_say_it_once_per_level(tmp_path: Path) -> None:
    name = "[bold]sglang[/bold]"  # rich markup in a name is printed as it is
    folder = _copy(tmp_path, name)
    lines = findings_lines(load_sweep(folder), [])
    queued = [Text.from_markup(line).plain for line in lines if line.startswith("[bold red]queued")]
    assert queued == [
        f"queued: {name} at rate=20 (repeats 0, 1): up to 25 requests waiting (up to 5 samples "
        "in a row), up to 255 running of its 256 slots at KV usage up to 0.94: requests "
        "waited to be admitted while arrivals kept coming (the engine's running-request "
        "limit, or KV room it keeps for tokens still to generate, held them back), so TTFT "
        "there counts that wait"
    ]
