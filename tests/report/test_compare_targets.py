"""``crossover compare BEFORE AFTER --target A=B``: a target of one sweep against another
of the other (a before/after of one engine under two names), and what differs in how each
pair ran: the engine's version and the effective settings it ran with. On the committed
H100 pair: SGLang as the open-loop decision ran it against SGLang given vLLM's limits
(docs/results/h100/sglang-slots-open)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from crossover.cli.app import main
from crossover.errors import UsageError
from crossover.report.compare import compare_sweeps
from crossover.report.load import load_sweep

ROOT = Path(__file__).resolve().parents[2]
DECIDED = ROOT / "docs/results/h100/moe-open-decide-freeze"
SLOTS = ROOT / "docs/results/h100/sglang-slots-open"
FREEZE = ROOT / "docs/results/h100/sglang-freeze-open"
SETTINGS = (
    "note: sglang->sglang-512: settings that differ (as the engine ran): kv_cache_tokens "
    "89,595 -> 132,506, kv_cache_gib 8.2 -> 12.14, parallel_slots 256 -> 512, "
    "gpu_memory_utilization 0.83 -> 0.88"
)


def _json_only(src: Path, dst: Path) -> Path:
    """The folder's sweep.json alone (its summaries are what compare reads)."""
    dst.mkdir()
    shutil.copy(src / "sweep.json", dst / "sweep.json")
    return dst


def test_a_pair_of_two_names_is_compared_with_what_it_ran_with(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["compare", str(DECIDED), str(SLOTS), "--target", "sglang=sglang-512"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [ln for ln in lines if ln.startswith("sglang->sglang-512 rate=20  TTFT p50")]
    assert len(rows) == 1 and "93.3" in rows[0] and "110.9" in rows[0]
    assert SETTINGS in lines
    # the same engine version on both sides: not said
    assert not any("another engine" in ln for ln in lines)
    # vLLM is not compared: it was not asked for
    assert not any(ln.startswith("vllm") for ln in lines)


def test_without_target_two_sweeps_with_no_name_in_common_say_how_to_pair(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["compare", str(FREEZE), str(SLOTS)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "error: no target in common: sglang, sglang-freeze vs sglang-512, sglang-512-graphs, "
        "vllm (--target sglang=sglang-512 pairs two of them)"
    ]


def test_without_target_the_names_in_common_are_compared(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """vLLM ran in both (the decision's launch, measured again beside SGLang given its
    limits): compared alone, as the one name the two hold in common."""
    assert main(["compare", str(DECIDED), str(SLOTS)]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [ln for ln in lines if "rate=" in ln]
    assert rows and all(ln.startswith("vllm rate=") for ln in rows)


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (
            "sglang=nope",
            "--target: {after} has no target nope (it holds: sglang-512, sglang-512-graphs, vllm)",
        ),
        ("nope=sglang-512", "--target: {before} has no target nope (it holds: vllm, sglang)"),
        ("sglang=", "--target 'sglang=': give BEFORE_NAME=AFTER_NAME, or one name"),
        ("=sglang-512", "--target '=sglang-512': give BEFORE_NAME=AFTER_NAME, or one name"),
    ],
)
def test_a_target_that_is_not_there_is_one_line(
    given: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", str(DECIDED), str(SLOTS), "--target", given]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: " + said.format(before=DECIDED, after=SLOTS)]


def test_one_name_alone_is_that_name_on_both_sides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--target vllm`` compares vLLM alone, though both sweeps hold SGLang too; the
    same settings and version on both sides give no note of them."""
    a = _json_only(DECIDED, tmp_path / "a")
    b = _json_only(DECIDED, tmp_path / "b")
    assert main(["compare", str(a), str(b), "--target", "vllm"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(ln.startswith("vllm rate=20") for ln in lines)
    assert not any(ln.startswith("sglang") for ln in lines)
    assert not any("settings that differ" in ln or "another engine" in ln for ln in lines)


def test_another_version_or_engine_is_said(tmp_path: Path) -> None:
    a = _json_only(DECIDED, tmp_path / "a")
    b = _json_only(DECIDED, tmp_path / "b")
    data = json.loads((b / "sweep.json").read_text())
    for t in data["targets"]:
        if t["name"] == "sglang":
            t["version"] = "0.5.18"
            t["settings"]["parallel_slots"] = 512
            t["settings"]["cuda_graph_max_bs"] = None
    (b / "sweep.json").write_text(json.dumps(data))
    cmp = compare_sweeps(load_sweep(a), load_sweep(b), "A", "B", pairs=[("sglang", "sglang")])
    assert cmp.notes[:2] == [
        "sglang: another engine version: 0.5.17 vs 0.5.18",
        "sglang: settings that differ (as the engine ran): cuda_graph_max_bs 256 -> -, "
        "parallel_slots 256 -> 512",
    ]
    cmp = compare_sweeps(load_sweep(a), load_sweep(b), "A", "B", pairs=[("vllm", "sglang")])
    assert cmp.notes[0] == "vllm->sglang: another engine: vllm vs sglang"


def test_two_runs_take_no_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads((DECIDED / "sweep.json").read_text())
    run = tmp_path / "run.json"
    run.write_text(json.dumps(data["runs"][0]["summary"]))
    assert main(["compare", str(run), str(run), "--target", "a=b"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: --target pairs the targets of two sweeps; these are two runs"


def test_pairs_are_checked_in_the_function_too() -> None:
    with pytest.raises(UsageError, match="B has no target x"):
        compare_sweeps(load_sweep(DECIDED), load_sweep(SLOTS), "A", "B", pairs=[("vllm", "x")])


def test_what_one_side_never_recorded_is_no_difference(tmp_path: Path) -> None:
    """A side without the engine's name, version or a setting (an older crossover, a URL
    target) says nothing of them: unknown is not another value."""
    a = _json_only(DECIDED, tmp_path / "a")
    b = _json_only(DECIDED, tmp_path / "b")
    data = json.loads((b / "sweep.json").read_text())
    for t in data["targets"]:
        if t["name"] == "sglang":
            t["engine"], t["version"] = None, None
            t["settings"] = {"parallel_slots": 512, "gpu_memory_utilization": 0.83}
    (b / "sweep.json").write_text(json.dumps(data))
    cmp = compare_sweeps(load_sweep(a), load_sweep(b), "A", "B", pairs=[("sglang", "sglang")])
    said = [n for n in cmp.notes if n.startswith(("sglang: settings", "sglang: another"))]
    assert said == [
        "sglang: settings that differ (as the engine ran): parallel_slots 256 -> 512 (28 more "
        "recorded on one side only)"
    ]
