"""The levels whose engine filled its KV cache with requests waiting are shown where a
sweep's results are read: the HTML report (escaped), the findings lines."""

from __future__ import annotations

import json
from pathlib import Path

from rich.text import Text

from crossover.report import load_sweep, write_report
from crossover.report.text import findings_lines

#: a target name a sweep file could carry, with markup in it
EVIL = "<script>alert(1)</script>"


def _fill_kv(sweep_dir: Path, name: str = "llamacpp") -> None:
    """llamacpp at 64, repeat 0: its KV cache full with 3 requests deferred (renamed
    ``name`` throughout)."""
    path = sweep_dir / "sweep.json"
    data = json.loads(path.read_text())
    for t in data["targets"]:
        if t["name"] == "llamacpp":
            t["name"] = name
    for r in data["runs"]:
        if r["target"] == "llamacpp":
            r["target"] = name
            if r["concurrency"] == 64 and r["repeat"] == 0:
                r["server_metrics"] = [
                    {"t_s": 1.0, "values": {"llamacpp:kv_cache_usage_ratio": 0.5}},
                    {
                        "t_s": 2.0,
                        "values": {
                            "llamacpp:kv_cache_usage_ratio": 0.99,
                            "llamacpp:requests_deferred": 3.0,
                        },
                    },
                ]
    path.write_text(json.dumps(data))


def _section(html: str) -> str:
    return html.split('id="kv-full"', 1)[1].split("<h2", 1)[0]


def test_the_report_shows_a_full_kv_level(sweep_dir: Path) -> None:
    before = write_report(sweep_dir, load_sweep(sweep_dir)).read_text()
    assert 'id="kv-full"' not in before and "KV cache full" not in before
    _fill_kv(sweep_dir)
    html = write_report(sweep_dir, load_sweep(sweep_dir)).read_text()
    section = _section(html)
    assert "the engine&#39;s KV cache was full: requests waited for room" in section
    row = '<tr><td>llamacpp</td><td>c=64</td><td class="num">0</td>'
    assert row + '<td class="num">0.99</td><td class="num">3</td>' in section
    assert "1 of 2" in section
    # and on the run's own row
    assert html.count('<span class="overloaded">KV cache full</span>') == 1


def test_a_target_name_with_markup_is_escaped_in_the_section(sweep_dir: Path) -> None:
    _fill_kv(sweep_dir, EVIL)
    html = write_report(sweep_dir, load_sweep(sweep_dir)).read_text()
    assert "<script" not in html.lower()
    assert "<td>&lt;script&gt;alert(1)&lt;/script&gt;</td><td>c=64</td>" in _section(html)


def test_the_findings_lines_say_it_once_per_level(sweep_dir: Path) -> None:
    name = "[bold]llamacpp[/bold]"  # rich markup in a name is printed as it is
    _fill_kv(sweep_dir, name)
    lines = findings_lines(load_sweep(sweep_dir), [])
    kv = [Text.from_markup(line).plain for line in lines if "KV full" in line]
    assert kv == [
        f"KV full: {name} at c=64 (repeat 0): KV usage up to 0.99, up to 3 requests "
        "waiting: the engine's KV cache was full: requests waited for room, so TTFT there "
        "counts that wait"
    ]
