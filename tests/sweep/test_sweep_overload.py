"""A rate sweep past one server's capacity: that level is flagged overloaded, in
sweep.json, in the line printed as it finishes, in the table and in the report, and the
findings lead with output tokens/s.

A's per-token gap grows 2 ms per other stream: its queue grows without bound past
1 / (15 x 2 ms) = 33 requests/s (conftest.open_request_ms); B never slows down."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from crossover.cli.app import main

from .conftest import Linear, open_request_ms, read_sweep, servers, target_flags

pytestmark = pytest.mark.slow

N = 16
A = Linear(a_ms=2.0, b_ms=2.0, ttft_ms=5.0)
B = Linear(a_ms=8.0, b_ms=0.0, ttft_ms=5.0)


def test_a_level_past_capacity_is_flagged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert math.isinf(open_request_ms(A, 64.0, N))  # past A's capacity
    assert not math.isinf(open_request_ms(A, 8.0, N))
    out = tmp_path / "sweep"
    with servers(A, B) as (url_a, url_b):
        rc = main(
            ["sweep", *target_flags({"A": url_a, "B": url_b}), "--rates", "8,64",
             "--output-tokens", str(N), "--input-tokens", "16", "--duration-s-per-level", "2",
             "--warmup", "0", "--out", str(out)]
        )  # fmt: skip
    assert rc == 0
    flags = {(r["target"], r["rate"]): r["overloaded"] for r in read_sweep(out)["runs"]}
    assert flags == {("A", 8.0): False, ("A", 64.0): True, ("B", 8.0): False, ("B", 64.0): False}
    captured = capsys.readouterr()
    assert "A rate=64 r=0  valid  OVERLOADED  out" in captured.err  # the line as it finishes
    printed = captured.out
    assert "output tok/s | done req/s | TTFT p50 ms" in printed
    assert "A is overloaded at 64 requests/s; at 64 it served" in printed
    # each list (crossovers, then the rest) leads with output tokens/s, not total tokens/s
    sections: list[list[str]] = []
    for ln in printed.splitlines():
        if ln.startswith(("crossovers", "without a crossover", "no crossover")):
            sections.append([])
        elif ln.startswith("  ") and sections:
            sections[-1].append(ln.strip())
    with_output = [s for s in sections if any(x.startswith("output tokens/s:") for x in s)]
    assert with_output and with_output[0][0].startswith("output tokens/s:"), sections
    html = (out / "report.html").read_text()
    assert "Overloaded rate levels" in html and "A is overloaded at 64 requests/s" in html
