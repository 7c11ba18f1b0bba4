"""A live decision's lines and JSON name the levels it measured past an engine's KV
capacity (``crossover.analysis.kv``) and the runs a logged long garbage collection met
(``crossover.analysis.gc``, on the committed docs/results/h100/sglang-gc: its sweep.db.xz
unpacked beside its engine log, as tests/analysis/test_gc.py builds it), for the
question's targets; the answer's note on a TTFT metric whose repeats moved says the
pause that met the level it names."""

from __future__ import annotations

import dataclasses
import lzma
import shutil
from pathlib import Path

import pytest

from crossover.analysis.gc import gc_runs
from crossover.decide.live import LiveResult
from crossover.decide.model import Decision, Observation, Question
from crossover.decide.state import PolicyConfig, State, moving_metric_notes
from crossover.decide.timing import live_json, live_lines
from crossover.report.load import load_sweep

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results" / "h100"
GRID = RESULTS / "moe-warm-grid"
GC = RESULTS / "sglang-gc"


def _result(targets: tuple[str, ...]) -> tuple[LiveResult, Question]:
    q = Question(kind="crossover", targets=targets, levels=(1, 256, 512))
    decision = Decision(question=q, findings=(), confidence=0.95)
    return LiveResult(decision, [], {}, load_sweep(GRID), 0), q


def test_the_live_answer_names_the_full_kv_levels(tmp_path: Path) -> None:
    result, q = _result(("vllm", "sglang"))
    kv = [line for line in live_lines(result, q, tmp_path) if line.startswith("KV full")]
    assert kv == [
        "KV full: vllm at c=512 (repeats 0, 1): KV usage up to 1.00, up to 314 requests "
        "waiting: the engine's KV cache was full: requests waited for room, so TTFT there "
        "counts that wait",
        "KV full: sglang at c=256 (repeats 0, 1): KV usage up to 1.00, up to 115 requests "
        "waiting: the engine's KV cache was full: requests waited for room, so TTFT there "
        "counts that wait",
    ]
    data = live_json(result, q, tmp_path)
    rows = [(x["target"], x["level"], x["repeat"]) for x in data["kv_full"]]
    assert rows == [("vllm", 512, 0), ("vllm", 512, 1), ("sglang", 256, 0), ("sglang", 256, 1)]
    first = data["kv_full"][2]
    assert first["peak_usage"] == 1.0 and first["peak_waiting"] == 57.0
    assert first["usage_series"] == "sglang:token_usage"
    assert first["waiting_series"] == "sglang:num_queue_reqs"


def test_only_the_questions_targets(tmp_path: Path) -> None:
    result, q = _result(("vllm", "llamacpp-q8"))
    assert {x["target"] for x in live_json(result, q, tmp_path)["kv_full"]} == {"vllm"}
    result, q = _result(("llamacpp-q8", "calibration"))  # neither has a KV gauge
    assert live_json(result, q, tmp_path)["kv_full"] == []
    assert not any(line.startswith("KV full") for line in live_lines(result, q, tmp_path))


def test_the_live_answer_names_levels_above_a_targets_slots(tmp_path: Path) -> None:
    """The grid's SGLang as if it had run 64 slots: a decision of vLLM and SGLang says its
    levels above them, in its lines and under ``above_slots`` in its JSON; vLLM's 512
    slots cover its levels, and the grid as it ran says nothing."""
    result, q = _result(("vllm", "sglang"))
    assert live_json(result, q, tmp_path)["above_slots"] == []
    sweep = result.sweep
    targets = [
        t.model_copy(update={"settings": {**t.settings, "parallel_slots": 64}})
        if t.name == "sglang"
        else t
        for t in sweep.targets
    ]
    slim = dataclasses.replace(result, sweep=sweep.model_copy(update={"targets": targets}))
    said = [x for x in live_lines(slim, q, tmp_path) if x.startswith("above slots: ")]
    assert len(said) == 1
    assert said[0].startswith("above slots: sglang at c=128, c=256, above the 64 requests")
    (found,) = live_json(slim, q, tmp_path)["above_slots"]
    assert (found["target"], found["slots"], found["levels"]) == ("sglang", 64, [128.0, 256.0])
    assert found["peak_waiting"] > 0


@pytest.fixture(scope="module")
def gc_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The committed SGLang GC sweep as a live decision's folder holds it."""
    out = tmp_path_factory.mktemp("sglang-gc")
    (out / "sweep.db").write_bytes(lzma.decompress((GC / "sweep.db.xz").read_bytes()))
    shutil.copy(GC / "sweep.json", out / "sweep.json")
    (out / "engines").mkdir()
    shutil.copy(GC / "engines" / "sglang.log.gz", out / "engines" / "sglang.log.gz")
    return out


def _gc_result(folder: Path, targets: tuple[str, ...]) -> tuple[LiveResult, Question]:
    q = Question(kind="crossover", targets=targets, levels=(64, 256), metrics=("ttft_ms.p50",))
    decision = Decision(question=q, findings=(), confidence=0.95)
    return LiveResult(decision, [], {}, load_sweep(folder), 0), q


def test_the_live_answer_names_the_gc_pauses(gc_dir: Path) -> None:
    result, q = _gc_result(gc_dir, ("sglang", "vllm"))
    lines = [line for line in live_lines(result, q, gc_dir) if line.startswith("GC pause")]
    assert len(lines) == 3
    assert lines[1] == (
        "GC pause: sglang c=256 (repeat 0): 2 garbage collections in SGLang's front end met "
        "this run's measured window: 0.53 s, ending 0.3-1.3 s into it (sglang.log.gz line "
        "912, at its edge: the log stamps whole seconds); 0.60 s, ending 9.3-10.3 s into it "
        "(sglang.log.gz line 1224): every request in flight waited it out"
    )
    data = live_json(result, q, gc_dir)["gc_pauses"]
    assert [(x["target"], x["level"], x["repeat"]) for x in data] == [
        ("sglang", 64, 1),
        ("sglang", 256, 0),
        ("sglang", 256, 1),
    ]
    first = data[1]
    assert first["engine"] == "SGLang"
    assert first["frozen"] is False  # no POST /freeze_gc in that log
    assert first["window_start"].startswith("2026-12-06T11:58:54")
    assert [(p["seconds"], p["line"], p["log"], p["inside"]) for p in first["pauses"]] == [
        (0.5337, 912, "sglang.log.gz", False),
        (0.5981, 1224, "sglang.log.gz", True),
    ]
    assert first["pauses"][0]["at"] == "2026-12-06T11:58:55+00:00"
    assert first["pauses"][0]["generation"] == 2


def test_gc_pauses_only_of_the_questions_targets(gc_dir: Path, tmp_path: Path) -> None:
    result, q = _gc_result(gc_dir, ("vllm", "llamacpp-q8"))
    assert live_json(result, q, gc_dir)["gc_pauses"] == []
    assert not any(line.startswith("GC pause") for line in live_lines(result, q, gc_dir))
    # a folder without engine logs: none, as before
    result, q = _gc_result(gc_dir, ("sglang", "vllm"))
    assert live_json(result, q, tmp_path)["gc_pauses"] == []


def test_the_note_on_the_committed_sweep_says_the_pauses_at_its_level(gc_dir: Path) -> None:
    """SGLang's TTFT p50 at 256: 1,154 ms in repeat 0, 530 in repeat 1 (sweep.json), both
    met by pauses; vllm measured flat beside it."""
    sweep = load_sweep(gc_dir)
    q = Question("crossover", ("sglang", "vllm"), (64, 256), ("ttft_ms.p50",))
    p50 = {(64, 0): 210.1, (256, 0): 1153.9, (64, 1): 266.0, (256, 1): 529.6}
    obs = [Observation("sglang", c, k, {"ttft_ms.p50": v}, c, c, 10.0) for (c, k), v in p50.items()]
    obs += [Observation("vllm", c, k, {"ttft_ms.p50": 500.0}, c, c, 10.0) for c, k in p50]
    s = State(q, obs, PolicyConfig())
    assert moving_metric_notes(s, gc_runs(gc_dir, sweep)) == [
        "TTFT p50: the repeats of one level moved by up to 118% (sglang at 256; GC pauses "
        "in SGLang's front end met repeat 0 (0.53 s, 0.60 s) and repeat 1 (0.53 s, 0.50 s)): "
        "a gap within that may read otherwise in another measurement of the same question; "
        "freeze_gc: true under sglang's launch (the engine's own GC freeze before each "
        "level) removed such pauses where measured"
    ]
    assert moving_metric_notes(s) == [
        "TTFT p50: the repeats of one level moved by up to 118% (sglang at 256): a gap "
        "within that may read otherwise in another measurement of the same question"
    ]


def test_the_pauses_the_decision_read_at_its_end_are_the_ones_said(gc_dir: Path) -> None:
    """``LiveResult.gc`` (read once as the decision ended) is what its lines and JSON say:
    the folder is not read again (here it holds pauses, the result none)."""
    result, q = _gc_result(gc_dir, ("sglang", "vllm"))
    assert any(line.startswith("GC pause") for line in live_lines(result, q, gc_dir))
    read = dataclasses.replace(result, gc=[])
    assert not any(line.startswith("GC pause") for line in live_lines(read, q, gc_dir))
    assert live_json(read, q, gc_dir)["gc_pauses"] == []


def test_a_replay_costing_more_than_the_grid_says_what_it_paid_twice(tmp_path: Path) -> None:
    """The H200 MoE tuning grid (one repeat): five levels of llama.cpp's CPU-expert targets
    were measured in part, then again whole where the drained part left a comparison open,
    so the replay measures more than the grid, and says why; thousands read 1,154."""
    from crossover.decide.replay import replay
    from crossover.decide.timing import replay_lines

    root = Path(__file__).resolve().parents[2] / "docs/results/h200/moe-tuning/sweep.db.xz"
    db = tmp_path / "tuning.db"
    with lzma.open(root) as fin, db.open("wb") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)
    r = replay(db)
    lines = replay_lines(r, db, None)
    i = next(i for i, ln in enumerate(lines) if ln.startswith("measuring time: "))
    assert sum(r.seconds.values()) > sum(r.grid_seconds.values())
    assert lines[i + 1] == (
        "  more than the grid: 5 levels measured in part, then again whole where the part "
        "left a comparison open, each paid for"
    )
    (total,) = [ln for ln in lines if ln.startswith("  total: ")]
    assert total.startswith("  total: 1,154 s (19.2 GPU-minutes")


def test_a_capacity_replay_checks_its_skips_against_the_grid(tmp_path: Path) -> None:
    """On the H200 MoE grid, TTFT p99 <= 500 ms: vLLM fails at 4 and its levels above are
    skipped, assuming the latency does not fall; the grid has it meet the SLO again at 16
    and 64, and the check says so (not a throughput comparison). The answer holds no
    crossover findings, and a target's own top level (llama.cpp's 128) is its first pass's."""
    from crossover.decide.replay import replay
    from crossover.decide.text import decision_json
    from crossover.spec.slo import SloTerm

    root = Path(__file__).resolve().parents[2] / "docs/results/h200/moe/sweep.db.xz"
    db = tmp_path / "moe.db"
    with lzma.open(root) as fin, db.open("wb") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)
    slo = SloTerm(metric="ttft_ms", stat="p99", limit=500.0)
    r = replay(db, kind="capacity", slo=slo)
    assert r.decision.capacity["vllm"] == (1, 4)
    assert r.decision.leader == "sglang"
    assert r.assumption_checks[0] == (
        "vllm: the assumption failed: the grid has it meet the SLO at 16 (179), 64 (306), "
        "above where it first failed"
    )
    assert r.decision.findings == () and decision_json(r.decision)["findings"] == []
    (skip,) = [sk for sk in r.decision.skipped if sk.target == "llamacpp-q8"]
    assert skip.levels == (32, 64, 128)  # its own levels only
    loose = replay(db, kind="capacity", slo=SloTerm(metric="ttft_ms", stat="p99", limit=1e9))
    assert loose.levels_measured["llamacpp-q8"][-1] == 128
    assert loose.decision.capacity["llamacpp-q8"] == (128, None)


def test_a_replay_of_a_grid_restarted_per_repeat_says_so(tmp_path: Path) -> None:
    """A sweep that measured each repeat on its own engine start (its stored identity says
    restart_between_repeats, as sweeps store it now) is replayed with a note: a live
    decide refuses such a YAML, and the repeats' spread holds a start's."""
    import sqlite3

    import orjson

    from crossover.decide.replay import replay

    root = Path(__file__).resolve().parents[2] / "docs/results/h100/moe-warm-restart"
    db = tmp_path / "restart.db"
    with lzma.open(root / "sweep.db.xz") as fin, db.open("wb") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)
    note = "the grid measured each repeat on its own engine start (restart_between_repeats)"
    assert not [n for n in replay(db).decision.notes if note in n]
    with sqlite3.connect(db) as con:
        (held,) = con.execute("SELECT v FROM meta WHERE k='identity'").fetchone()
        ident = {**orjson.loads(held), "restart_between_repeats": True}
        con.execute("UPDATE meta SET v=? WHERE k='identity'", (orjson.dumps(ident).decode(),))
    assert [n for n in replay(db).decision.notes if note in n]
