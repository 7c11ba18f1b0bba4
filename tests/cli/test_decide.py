"""What a live ``crossover decide`` says while it measures: each level as it starts, a
sequential level that stopped sending marked as the part of its level it is (the same
level measured whole later prints again under the same name), and runs kept from before
one line per target, as a sweep says them; and what ``decide --check`` estimates a session
costs."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from rich.console import Console

from crossover.cli.app import main
from crossover.cli.decide import live_events
from crossover.measure import Progress
from crossover.metrics.summary import RunSummary
from crossover.report.text import KeptRuns

from ..analysis.synthetic_servers import summary


def _summary(sent: int) -> RunSummary:
    s = RunSummary.model_validate(summary(total=1000.0, ttft_ms=20.0, itl_ms=5.0))
    s.requests.sent = sent
    return s


def _said(events: Any, console: Console, sent: int, planned: int) -> str:
    level: Any = SimpleNamespace(label="c=4")
    assert events.on_level_start is not None and events.on_level_done is not None
    events.on_level_start("batched", level, 0, Progress(total=planned))
    events.on_level_done("batched", level, 0, _summary(sent), "done")
    return console.export_text()


def test_a_level_says_it_starts_and_a_part_says_it_is_one() -> None:
    console = Console(width=300, record=True)
    text = _said(live_events(console, KeptRuns(console)), console, 7, 16)
    lines = text.splitlines()
    assert lines[0] == "batched c=4 r=0: measuring ..."
    assert lines[1].startswith("batched c=4 r=0  valid")
    assert lines[1].endswith("(a part of the level: 7 of 16 requests sent)")


def test_a_whole_level_is_not_called_a_part() -> None:
    console = Console(width=300, record=True)
    assert "a part" not in _said(live_events(console, KeptRuns(console)), console, 16, 16)


def test_runs_kept_from_before_are_one_line_per_target() -> None:
    """A resumed decision printed a line per kept run (a hundred on a big grid); now one
    per target, said before the next level starts and, at the end, by the caller's flush."""
    console = Console(width=300, record=True)
    kept = KeptRuns(console)
    events = live_events(console, kept)
    assert events.on_skip is not None and events.on_level_start is not None
    levels: list[Any] = [SimpleNamespace(label=f"c={c}") for c in (1, 2, 4)]
    for name in ("fast", "batched"):
        for level in levels[:2]:
            for r in (0, 1):
                events.on_skip(name, level, r)
    events.on_level_start("fast", levels[2], 0, Progress(total=16))
    events.on_skip("batched", levels[2], 0)
    kept.flush()
    assert console.export_text().splitlines() == [
        "fast: 4 runs done earlier, kept (c=1 r=0, c=1 r=1, c=2 r=0, c=2 r=1)",
        "batched: 4 runs done earlier, kept (c=1 r=0, c=1 r=1, c=2 r=0, c=2 r=1)",
        "fast c=4 r=0: measuring ...",
        "batched: 1 run done earlier, kept (c=4 r=0)",
    ]


def test_check_estimates_the_session_from_the_prior(capsys: Any) -> None:
    """``decide --check --prior``: the grid's and the first pass's GPU time from the
    forecast's output tokens/s (the H100 MoE decision's YAML and prediction), none
    without a prior."""
    root = Path(__file__).resolve().parents[2]
    config = str(root / "scripts" / "h200" / "moe-a-warm-h100.yaml")
    prior = str(root / "docs" / "results" / "h100" / "moe-warm-grid" / "prediction.json")
    argv = ["decide", "--config", config, "--check", "--remote", "--prior", prior]
    assert main(argv) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "estimate (from the prior's throughput, starts vllm 107 s, llamacpp-q8 4 s, "
        "sglang 106 s): grid 813 s measuring + 3 starts = 17.2 GPU-min; first pass 280 s "
        "+ 3 starts = 8.3 GPU-min (the rest depends on what it measures)"
    )
    assert main([*argv, "--start-s", "60"]) == 0
    assert "starts 60 s each, --start-s): grid 813 s measuring + 3 starts = 16.6 GPU-min" in (
        capsys.readouterr().out
    )
    assert main(["decide", "--config", config, "--check", "--remote"]) == 0
    assert (
        capsys.readouterr().out.splitlines()[-1].startswith("estimate: no estimate without --prior")
    )


def test_check_under_a_budget_plans_without_the_grid_s_top_level(
    tmp_path: Path, capsys: Any
) -> None:
    """Under ``--budget`` the policy leaves the grid's top level out of the first pass
    (the dearest; what it would settle is said when it is not measured): ``--check``
    prints that plan, not the unbudgeted one."""
    config = tmp_path / "d.yaml"
    config.write_text(
        "concurrency: [1, 2, 4, 8, 16, 32, 64, 128]\noutput_tokens: 16\ninput_tokens: 8\n"
        "targets:\n"
        "  - {name: a, url: 'http://127.0.0.1:9', model: m}\n"
        "  - {name: b, url: 'http://127.0.0.1:9', model: m}\n"
    )
    argv = ["decide", "--config", str(config), "--check", "--remote"]

    def plan(*extra: str) -> list[str]:
        assert main([*argv, *extra]) == 0
        return [ln.strip() for ln in capsys.readouterr().out.splitlines() if ln.startswith("  a:")]

    assert plan() == ["a: 1,4,16,64,128"]
    assert plan("--budget", "0.33") == ["a: 1,4,16,64"]


def test_a_decision_of_another_question_is_kept_not_overwritten(tmp_path: Path) -> None:
    """A second question on the same folder (here lead after crossover) keeps the earlier
    answer beside it, numbered; the same question again replaces its own."""
    import json

    from crossover.cli.decide import _keep_other_question

    path = tmp_path / "decision.json"
    first = {"question": {"kind": "crossover", "levels": [1, 4]}, "findings": []}
    path.write_text(json.dumps(first))
    _keep_other_question(path, {"question": {"kind": "crossover", "levels": [1, 4]}})
    assert path.exists() and not (tmp_path / "decision.1.json").exists()
    _keep_other_question(path, {"question": {"kind": "lead", "levels": [1, 4], "at": [4]}})
    assert not path.exists()
    assert json.loads((tmp_path / "decision.1.json").read_text()) == first
    path.write_text(json.dumps(first))
    _keep_other_question(path, {"question": {"kind": "capacity"}})
    assert (tmp_path / "decision.2.json").exists()
