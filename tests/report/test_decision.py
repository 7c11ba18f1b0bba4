"""A ``crossover decide`` answer in the sweep folder (``decision.json``) leads the report:
its question, answer, what it did not measure and why (the assumption and what checked
it), what a time budget deferred, and each target's GPU time. Its strings are text (a
target named ``<script>`` stays text); a file that is not a decision is one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crossover.errors import UsageError
from crossover.report import load_sweep, write_report
from crossover.report.decision import decision_context, load_decision


def _decision(**extra: Any) -> dict[str, Any]:
    return {
        "schema": "crossover.decision/1",
        "question": {
            "kind": "crossover",
            "targets": ["vllm", "<script>alert(1)</script>"],
            "levels": [1, 4, 16, 64],
            "metrics": ["total_tokens_per_s", "ttft_ms.p50"],
            "at": [],
            "slo": None,
            "repeats": 2,
        },
        "confidence": 0.95,
        "findings": [{"metric": "total_tokens_per_s", "text": "vllm leads <b>x</b> over 1-16"}],
        "capacity": {},
        "leader": None,
        "not_measured": [
            {
                "target": "llamacpp",
                "levels": [64, 128],
                "reason": "saturated by 16",
                "assumption": "throughput does not fall",
                "checked": "measured at 4 and 16",
            }
        ],
        "notes": ["a curve fell"],
        "budget": None,
        "deferred": [
            {"target": "vllm", "level": 8, "repeat": 1, "seconds": 12.0, "why": "uncertain"}
        ],
        **extra,
    }


LIVE = {
    "live": {
        "out": "d",
        "times": {
            "vllm": {
                "measuring_s": 83.2,
                "wall_s": 249.0,
                "starts": 1,
                "levels": [16, 1, 4],
                "launched": True,
                "ready_s": [159.0],
                "stop_s": [0.8],
                "stopped": ["1 r=0: stopped sending once 4 of 16 requests had finished"],
            }
        },
        "measured": 25,
        "grid_levels": 54,
    }
}


def test_the_decision_leads_the_report_and_its_strings_stay_text(sweep_dir: Path) -> None:
    (sweep_dir / "decision.json").write_text(json.dumps(_decision(**LIVE)))
    html = write_report(sweep_dir, load_sweep(sweep_dir)).read_text()
    head = html.split('<h2 id="findings">')[0]
    assert '<h2 id="decision">Decision</h2>' in head
    assert "<h1>crossover decision report</h1>" in head
    assert "where the targets cross on total tokens/s, TTFT p50" in head
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in head
    assert "vllm leads &lt;b&gt;x&lt;/b&gt; over 1-16" in head
    assert "llamacpp at 64,128: saturated by 16" in head
    assert "assumes throughput does not fall" in head and "checked: measured at 4 and 16" in head
    assert "vllm at 8 (repeat 1): about 12.0 s, uncertain" in head
    assert "note: a curve fell" in head
    assert "<td>1 (159.0 s to ready)</td><td>1,4,16</td>" in head
    assert "level 1 r=0: stopped sending once 4 of 16 requests had finished</td>" in head
    assert (
        "GPU time: 249.0 s (4.2 GPU-minutes)" in head
        and "25 levels measured of the grid&#39;s 54" in head
    )


def test_no_decision_section_without_the_file(sweep_dir: Path) -> None:
    html = write_report(sweep_dir, load_sweep(sweep_dir)).read_text()
    assert 'id="decision"' not in html and "<h1>crossover sweep report</h1>" in html


def test_a_replay_shows_its_measuring_against_the_grid() -> None:
    replay = {"replay": {"database": "moe.db", "seconds": {"vllm": 83.0}, "fraction": 0.27,
                         "grid_seconds": {"vllm": 186.0}}}  # fmt: skip
    ctx = decision_context(_decision(**replay))
    assert ctx is not None
    assert ctx["times"][0]["measuring"] == "83.0" and "186.0" in ctx["times"][0]["stopped"][0]
    assert ctx["total"] == "replayed from moe.db: measuring (27% of the grid's)"


def test_a_capacity_answer_names_each_bracket() -> None:
    d = _decision(capacity={"a": [16, 32], "b": [None, 1]}, leader="a")
    d["question"].update(kind="capacity", slo={"metric": "ttft_ms.p99", "limit": 500})
    ctx = decision_context(d)
    assert ctx is not None
    assert ctx["question"].startswith("which target serves the most concurrency with TTFT p99")
    assert ctx["answer"] == [
        "a: meets it up to 16, fails it at 32",
        "b: meets it at no level measured",
        "answer: a",
    ]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", "not readable JSON"),
        (json.dumps({"schema": "crossover.sweep/1"}), 'not a decision (expected "schema"'),
        (json.dumps([1, 2]), "not a decision"),
    ],
)
def test_a_file_that_is_not_a_decision_is_one_line(tmp_path: Path, text: str, says: str) -> None:
    (tmp_path / "decision.json").write_text(text)
    with pytest.raises(UsageError) as err:
        load_decision(tmp_path)
    assert says in str(err.value) and "\n" not in str(err.value)
