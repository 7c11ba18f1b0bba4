"""The live MoE decision's README (docs/results/h200/moe-decide) states what
``scripts/h200/decide_vs_grid.py`` prints for it: its conclusions against the committed
grid's, the levels where they contradict, and its measuring time against the grid's. A
change to the analysis or the replay's rule that moves any of them fails here, and the
README must be re-run."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import pytest

from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "docs" / "results" / "h200"


def _script() -> ModuleType:
    return load_script(ROOT / "scripts" / "h200" / "decide_vs_grid.py", "decide_vs_grid", True)


def _rows_in(out: str, readme: str) -> int:
    """Each pair's row the script printed is in the README's table (metric names as the
    README writes them); how many rows."""
    rows = 0
    for line in out.splitlines():
        m = re.match(r"\| (\S+ vs \S+) \| (\S+) \| ([^|]+) \| ([^|]+) \| (yes|\*\*no\*\*) \|", line)
        if m and m[2] in ("total_tokens_per_s", "ttft_ms.p50"):
            metric = {"total_tokens_per_s": "total tokens/s", "ttft_ms.p50": "TTFT p50"}[m[2]]
            row = f"| {m[1]} | {metric} | {m[3].strip()} | {m[4].strip()} | {m[5]} |"
            assert row in readme, row
            rows += 1
    return rows


def test_the_readme_states_what_the_comparison_prints(capsys: pytest.CaptureFixture[str]) -> None:
    rc = _script().main([str(H200 / "moe-decide"), str(H200 / "moe")])
    out = capsys.readouterr().out
    readme = (H200 / "moe-decide" / "README.md").read_text("utf-8")
    assert rc == 1  # not every conclusion is the grid's
    same = re.search(r"(\d+) of (\d+) conclusions the same", out)
    assert same is not None
    assert f"reached {same[1]} of the grid's {same[2]} conclusions" in readme
    assert _rows_in(out, readme) == 6
    contradictions = re.search(r"(\d+) level\(s\) where", out)
    assert contradictions is not None and contradictions[1] == "1"
    assert "agree except one" in readme
    spent = re.search(r"measuring (\d+) s of the grid's (\d+) s \((\d+)%\)", out)
    assert spent is not None
    assert f"{spent[1]} s of the grid's {spent[2]} s of" in readme
    assert f"{spent[1]} s of the grid's {spent[2]} s ({spent[3]}%)" in readme


def test_with_the_tie_margin_the_readme_states_what_the_comparison_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc = _script().main([str(H200 / "moe-decide"), str(H200 / "moe"), "--tie-margin", "0.03"])
    out = capsys.readouterr().out
    readme = (H200 / "moe-decide" / "README.md").read_text("utf-8")
    same = re.search(r"(\d+) of (\d+) conclusions the same", out)
    contradictions = re.search(r"(\d+) level\(s\) where", out)
    assert rc == 1 and same is not None and contradictions is not None
    assert (
        f"{same[1]} of {same[2]} conclusions the same, {contradictions[1]} levels contradicting"
        in " ".join(readme.split())
    )


H100 = ROOT / "docs" / "results" / "h100"


def _states(out: str, readme: str, same: tuple[str, str], engines_up: str) -> None:
    """A live decision's README states what the comparison printed: the conclusions the
    same (``same``), each pair's row, no level contradicting, the measuring time and the
    GPU time (``engines_up``, formatted with ``gpu``, the seconds)."""
    flat = " ".join(readme.split())
    m = re.search(r"(\d+) of (\d+) conclusions the same", out)
    assert m is not None and (m[1], m[2]) == same
    assert f"{m[1]} of the grid's {m[2]} conclusions" in flat
    assert _rows_in(out, readme) == 6
    contradictions = re.search(r"(\d+) level\(s\) where", out)
    assert contradictions is not None and contradictions[1] == "0"
    spent = re.search(r"measuring (\d+) s of the grid's (\d+) s \((\d+)%\)", out)
    assert spent is not None
    assert f"{spent[1]} s of the grid's {spent[2]} s of measuring ({spent[3]}%)" in flat
    gpu = re.search(r"GPU time \(engines up, start to stop\): (\d+) s", out)
    assert gpu is not None and engines_up.format(gpu=int(gpu[1])) in flat


def test_the_h100_decision_s_readme_states_what_the_comparison_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """docs/results/h100/moe-warm-decide: the fair live proof, a decision and a grid from
    one YAML on the same card, both read with the tie margin. Its README's table, count of
    conclusions, contradicting levels and measuring time are what the script prints."""
    rc = _script().main(
        [str(H100 / "moe-warm-decide"), str(H100 / "moe-warm-grid"), "--tie-margin", "0.03"]
    )
    out = capsys.readouterr().out
    readme = (H100 / "moe-warm-decide" / "README.md").read_text("utf-8")
    assert rc == 1  # one conclusion is not the grid's
    assert "the decision on NVIDIA H100 80GB HBM3, the grid on NVIDIA H100 80GB HBM3" in out
    _states(out, readme, ("5", "6"), "Engines up: {gpu} s")


def test_the_second_h100_decision_s_readme_states_what_the_comparison_prints(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/results/h100/moe-warm-decide-b: the same question asked again on another H100
    (the decision A/A). Its README's table, counts, measuring time and GPU time are what the
    script prints; every throughput conclusion is the grid's, the two TTFT ones are not."""
    monkeypatch.chdir(ROOT)  # the README's command runs from the repository root
    rc = _script().main(
        ["docs/results/h100/moe-warm-decide-b", "docs/results/h100/moe-warm-grid"]
        + ["--tie-margin", "0.03"]
    )
    out = capsys.readouterr().out
    readme = (H100 / "moe-warm-decide-b" / "README.md").read_text("utf-8")
    assert out.strip() == (H100 / "moe-warm-decide-b" / "comparison.md").read_text("utf-8").strip()
    assert rc == 1
    _states(out, readme, ("4", "6"), "engines up {gpu:,} s")
    for line in out.splitlines():
        if "| total_tokens_per_s |" in line and line.endswith(("| yes |", "| **no** |")):
            assert line.endswith("| yes |"), line  # each pair's throughput conclusion


def test_the_second_h100_decision_s_readme_holds_the_spread_script_s_output(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.scripts import load_script

    monkeypatch.chdir(ROOT)
    folders = [
        f"docs/results/h100/{f}"
        for f in ("moe-warm-grid", "moe-warm-decide", "moe-warm-decide-b", "moe-warm-restart")
    ]
    script = load_script(ROOT / "scripts" / "h200" / "repeat_spread.py", "repeat_spread", True)
    args = [*folders, "--targets", "vllm,sglang", "--max-level", "64", "--tie-margin", "0.03"]
    assert script.main(args) == 0
    out = capsys.readouterr().out
    assert out.strip() in (H100 / "moe-warm-decide-b" / "README.md").read_text("utf-8")
    # TTFT p50 of vLLM against SGLang at 1-64: the grid's crossover, three inconclusive
    assert out.count("TTFT p50: vllm vs sglang: inconclusive") == 3
