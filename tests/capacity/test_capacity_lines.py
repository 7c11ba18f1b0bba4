"""An invalid level is never shown as a bare meet or miss: its line, the table's SLO column
and the conclusion say it was invalid and why."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from crossover.capacity.schema import CapacityFile, CapacityLevel, SloCheck
from crossover.cli.capacity import level_line, print_result, slo_word
from crossover.metrics.summary import Problem
from crossover.spec.slo import parse_slo


def _level(
    verdict: str, sent: int, problems: list[Problem] | None = None, *, overloaded: bool = False
) -> CapacityLevel:
    summary = SimpleNamespace(
        verdict=verdict,
        problems=problems or [],
        requests=SimpleNamespace(sent=sent),
        goodput=None,
        queue_ms=SimpleNamespace(p99=None),
    )
    return CapacityLevel.model_construct(
        rate_rps=1.0,
        trace_speed=None,
        met=False,
        overloaded=overloaded,
        checks=[SloCheck(term="ttft_ms.max", limit=100, measured=None, met=False)],
        seconds=0.2,
        run_id=None,
        summary=summary,
    )


def test_a_level_with_nothing_sent_says_invalid_and_why() -> None:
    line = level_line(_level("invalid", 0))
    assert "invalid" in line
    assert "no request was sent" in line
    assert "misses" not in line
    assert slo_word(_level("invalid", 0)) == "invalid (counted as missing)"


def test_an_invalid_level_names_its_first_error() -> None:
    err = Problem(code="timeout", severity="error", count=3, message="3 requests failed; x")
    line = level_line(_level("invalid", 10, [err]))
    assert "invalid" in line and "3 requests failed; x" in line


def test_valid_and_overloaded_levels_keep_their_words() -> None:
    assert "misses" in level_line(_level("valid", 10))
    assert "invalid" not in level_line(_level("valid", 10))
    over = _level("invalid", 10, overloaded=True)
    assert "invalid" not in level_line(over)
    assert slo_word(over) == "misses (overloaded)"


def test_the_conclusion_counts_the_invalid_levels(capsys: pytest.CaptureFixture[str]) -> None:
    result = CapacityFile.model_construct(
        target={},
        slo=parse_slo("ttft_ms.max=100"),
        precision=0.1,
        verdict="below_min_rate",
        max_rate_rps=None,
        interval=(None, 1.0),
        goodput_rps=None,
        levels=[_level("invalid", 0)],
        seconds=1.0,
    )
    print_result(result)
    out = " ".join(capsys.readouterr().out.split())
    assert "1 of 1 levels invalid" in out
    assert "1 level, 1 s" in out  # it read "1 levels"
    assert "no request was sent" in out


def test_the_goodput_at_capacity_says_what_arrived(capsys: pytest.CaptureFixture[str]) -> None:
    """Poisson arrivals match the level's rate only on average: goodput above the nominal
    rate (234 at 226 requests/s, seen) is explained by the rate that arrived."""
    level = _level("valid", 10)
    level.rate_rps, level.met = 226.27, True
    level.summary.load = SimpleNamespace(arriving_rps=237.3)  # type: ignore[union-attr]
    result = CapacityFile.model_construct(
        target={},
        slo=parse_slo("ttft_ms.max=100"),
        precision=0.1,
        verdict="found",
        max_rate_rps=226.27,
        interval=(226.27, 269.1),
        goodput_rps=234.1,
        levels=[level],
        seconds=1.0,
    )
    print_result(result)
    out = " ".join(capsys.readouterr().out.split())
    assert "goodput at capacity: 234 requests/s meet every term (237 requests/s arrived" in out
