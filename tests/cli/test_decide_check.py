"""``decide --check --json F``: the plan it prints, written as JSON (the question, each
target's first-pass levels, the GPU-time estimate from ``--prior`` or ``null`` without
one), through the decision's own writer, which refuses to write over the YAML or the
prior."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from crossover.cli.app import main

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "scripts" / "h200" / "moe-a-warm-h100.yaml"
PRIOR = ROOT / "docs" / "results" / "h100" / "moe-warm-grid" / "prediction.json"
CHECK = ["decide", "--config", str(CONFIG), "--check", "--remote"]


def _checked(capsys: Any, path: Path, *extra: str) -> tuple[list[str], dict[str, Any]]:
    """The lines printed and the JSON written by ``decide --check ... --json path``."""
    assert main([*CHECK, *extra, "--json", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == f"plan: {path}"
    return lines[:-1], json.loads(path.read_text())


def _first_pass(lines: list[str], targets: list[str]) -> dict[str, list[int]]:
    """Each target's first-pass levels as printed (``  vllm: 1,4,16``)."""
    start = next(i for i, ln in enumerate(lines) if ln.startswith("decide plan: "))
    out: dict[str, list[int]] = {}
    for ln in lines[start:]:
        name, _, levels = ln.strip().partition(": ")
        if name in targets and ln.startswith("  "):
            out[name] = [int(c) for c in levels.split(",")]
    return out


def test_the_plan_with_a_prior_is_written_as_printed(tmp_path: Path, capsys: Any) -> None:
    lines, plan = _checked(capsys, tmp_path / "plan.json", "--prior", str(PRIOR))
    assert set(plan) == {
        "schema", "config", "question", "grid_levels", "order", "reference",
        "reference_from", "first_pass", "first_pass_steps", "estimate",
    }  # fmt: skip
    assert plan["schema"] == "crossover.decision-plan/1"
    assert plan["config"] == str(CONFIG)
    q = plan["question"]
    assert q["kind"] == "crossover"
    assert q["metrics"] == ["total_tokens_per_s", "ttft_ms.p50"]
    assert q["targets"] == ["vllm", "llamacpp-q8", "sglang"]
    assert q["slo"] is None and q["at"] == [] and q["repeats"] == 2
    head = next(ln for ln in lines if ln.startswith("decide plan: "))
    assert head == (
        f"decide plan: crossover on total_tokens_per_s, ttft_ms.p50; the grid is "
        f"{plan['grid_levels']} levels (3 targets, 2 repeats)"
    )
    assert plan["grid_levels"] == 54
    assert plan["order"] == "target"
    assert (plan["reference"], plan["reference_from"]) == ("vllm", "prior")
    assert "reference vllm (the prior's predicted leader)" in "\n".join(lines)
    # the order printed is the order written: the reference first
    assert list(plan["first_pass"]) == ["vllm", "sglang", "llamacpp-q8"]
    assert plan["first_pass"] == _first_pass(lines, q["targets"])
    assert plan["first_pass"]["vllm"] == [1, 4, 16, 32, 64, 256]

    est = plan["estimate"]
    assert est["text"] == lines[-1]
    assert (est["start_s"], est["start_s_source"], est["missing"]) == (107.0, "default", [])
    # each engine's own estimate: llama.cpp loads its GGUF in seconds
    starts = {"vllm": 107.0, "llamacpp-q8": 4.0, "sglang": 106.0}
    assert est["start_s_per_target"] == starts
    grid, first = est["grid"], est["first_pass"]
    keys = {"measuring_s", "runs", "starts", "gpu_s", "gpu_minutes", "stopped"}
    assert set(grid) == set(first) == set(est["first_pass_low"]) == keys
    # two waves a level: nothing sequential, the range one figure
    assert est["first_pass_low"] == est["first_pass_high"] == first
    assert (grid["runs"], grid["starts"], first["starts"]) == (54, 3, 3)
    for part in (grid, first):  # one start of each target
        assert part["gpu_s"] == pytest.approx(part["measuring_s"] + sum(starts.values()))
        assert part["gpu_minutes"] == pytest.approx(part["gpu_s"] / 60)
    # the figures the line rounds
    assert (
        f"grid {grid['measuring_s']:,.0f} s measuring + {grid['starts']} starts = "
        f"{grid['gpu_minutes']:.1f} GPU-min; first pass {first['measuring_s']:,.0f} s + "
        f"{first['starts']} starts = {first['gpu_minutes']:.1f} GPU-min"
    ) in lines[-1]
    assert "grid 813 s measuring + 3 starts = 17.2 GPU-min" in lines[-1]


def test_two_wave_levels_are_planned_whole_as_the_live_run_measures_them(
    tmp_path: Path, capsys: Any
) -> None:
    """The YAML's levels are two waves (``requests_per_concurrency: 2``, at least 4): no
    stop after a first wave leaves a request unsent, so the live run measures every level
    whole (``coarse.sequential_first_pass``); the plan says so, and not "sequential"."""
    lines, plan = _checked(capsys, tmp_path / "plan.json", "--prior", str(PRIOR))
    said = lines[next(i for i, ln in enumerate(lines) if ln.startswith("decide plan: ")) :]
    assert not any("sequential" in ln for ln in said), said
    assert said[1].endswith("reference vllm (the prior's predicted leader), its levels whole")
    assert said[5] == (
        "  after it, every level whole: a stop would save nothing, each level's requests all "
        "sent by the time it may first stop"
    )
    steps = plan["first_pass_steps"]
    assert {t: [s["level"] for s in mine] for t, mine in steps.items()} == plan["first_pass"]
    assert not any(s["sequential"] for mine in steps.values() for s in mine)
    assert steps["sglang"][2]["why"] == (
        "first pass, whole: a stop would save nothing (32 requests on 16 streams, all sent by "
        "the time 16 have finished)"
    )


def test_four_wave_levels_are_planned_sequential(tmp_path: Path, capsys: Any) -> None:
    """Four waves a level (``requests_per_concurrency: 4``): a stop after the first wave
    leaves requests unsent from 4 streams up, so those levels are sequential; at 1 stream
    the level's 4 requests are all sent by the time it may first stop (4 finished): whole."""
    config = tmp_path / "four.yaml"
    text = CONFIG.read_text()
    assert "\nrequests_per_concurrency: 2\n" in text
    config.write_text(
        text.replace("\nrequests_per_concurrency: 2\n", "\nrequests_per_concurrency: 4\n")
    )
    argv = ["decide", "--config", str(config), "--check", "--remote", "--prior", str(PRIOR)]
    assert main([*argv, "--json", str(tmp_path / "plan.json")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert (
        "  after it, sequential (each stops once it settles against those measured there): "
        "sglang 4,16,32,64,256; llamacpp-q8 4,16,32,64"
    ) in lines
    assert (
        "  after it, whole (a stop would save nothing, each level's requests all sent by the "
        "time it may first stop): sglang 1; llamacpp-q8 1"
    ) in lines
    plan = json.loads((tmp_path / "plan.json").read_text())
    steps = plan["first_pass_steps"]
    assert [s["sequential"] for s in steps["vllm"]] == [False] * 6
    assert [s["sequential"] for s in steps["llamacpp-q8"]] == [False, True, True, True, True]
    # the estimate's first pass a range: the 9 sequential levels stopped at the first
    # chance (two of their four waves), then each whole
    est = plan["estimate"]
    low, high = est["first_pass_low"], est["first_pass_high"]
    assert high == est["first_pass"] and (low["stopped"], high["stopped"]) == (9, 0)
    assert low["measuring_s"] < high["measuring_s"] and low["runs"] == high["runs"]
    assert (
        f"first pass {low['measuring_s']:,.0f}-{high['measuring_s']:,.0f} s + 3 starts = "
        f"{low['gpu_minutes']:.1f}-{high['gpu_minutes']:.1f} GPU-min (low with 9 sequential "
        "levels stopped at the first chance, high with every level whole"
    ) in lines[-2]


def test_start_s_is_the_estimate_s_start(tmp_path: Path, capsys: Any) -> None:
    args = ("--prior", str(PRIOR), "--start-s", "60")
    lines, plan = _checked(capsys, tmp_path / "plan.json", *args)
    est = plan["estimate"]
    assert (est["start_s"], est["start_s_source"]) == (60.0, "--start-s")
    assert est["grid"]["gpu_s"] == pytest.approx(est["grid"]["measuring_s"] + 3 * 60.0)
    assert est["text"] == lines[-1]
    assert "starts 60 s each, --start-s" in lines[-1]


def test_the_plan_without_a_prior_has_no_estimate(tmp_path: Path, capsys: Any) -> None:
    lines, plan = _checked(capsys, tmp_path / "plan.json")
    assert plan["estimate"] is None
    assert lines[-1].startswith("estimate: no estimate without --prior")
    assert (plan["reference"], plan["reference_from"]) == ("vllm", "config")
    assert "reference vllm (the YAML's first)" in "\n".join(lines)
    assert plan["first_pass"] == _first_pass(lines, plan["question"]["targets"])
    assert next(iter(plan["first_pass"])) == "vllm"


def test_a_prior_without_output_rates_writes_why(tmp_path: Path, capsys: Any) -> None:
    """A forecast with total tokens/s (where to look first) but no output tokens/s gives
    no estimate: the JSON says so with the printed line, no figures."""
    data = json.loads(PRIOR.read_text())
    for row in data["rows"]:
        row.pop("output_tok_s", None)
    prior = tmp_path / "total-only.json"
    prior.write_text(json.dumps(data))
    lines, plan = _checked(capsys, tmp_path / "plan.json", "--prior", str(prior))
    est = plan["estimate"]
    assert (est["grid"], est["first_pass"], est["missing"]) == (None, None, [])
    assert est["text"] == lines[-1]
    assert re.match(r"estimate: none; .*predicts no target's output tokens/s$", lines[-1])


def test_a_level_the_prior_does_not_predict_is_named(tmp_path: Path, capsys: Any) -> None:
    data = json.loads(PRIOR.read_text())
    data["rows"] = [
        r for r in data["rows"] if (r["target"], r["concurrency"]) != ("llamacpp-q8", 4)
    ]
    prior = tmp_path / "gap.json"
    prior.write_text(json.dumps(data))
    lines, plan = _checked(capsys, tmp_path / "plan.json", "--prior", str(prior))
    est = plan["estimate"]
    assert est["grid"] is None and est["first_pass"] is None
    assert est["missing"] == [{"target": "llamacpp-q8", "level": 4}]
    assert lines[-1] == "estimate: none; the prior predicts no output tokens/s for llamacpp-q8 at 4"


def test_a_capacity_plan_writes_its_slo(tmp_path: Path, capsys: Any) -> None:
    args = ("--question", "capacity", "--slo", "ttft_ms.p99<=500")
    lines, plan = _checked(capsys, tmp_path / "plan.json", *args)
    assert plan["question"]["kind"] == "capacity"
    assert plan["question"]["slo"] == {"metric": "ttft_ms.p99", "limit": 500.0}
    i = next(i for i, ln in enumerate(lines) if ln.startswith("decide plan: "))
    # the SLO is the question, not the crossover's metrics; one run a level, no repeats
    assert lines[i] == (
        "decide plan: capacity under ttft_ms.p99<=500; the grid is 54 levels (3 targets, 2 repeats)"
    )
    assert not [ln for ln in lines if "a crossover is wide" in ln or "sequential" in ln]
    assert any(ln.startswith("  each level whole, one run") for ln in lines)
    # each target's own top level is in its first pass, as the live capacity step has it
    assert "  llamacpp-q8: 1,4,16,64,128" in lines


@pytest.mark.parametrize("own", ["config", "prior"])
def test_json_never_overwrites_the_config_or_the_prior(
    tmp_path: Path, capsys: Any, own: str
) -> None:
    config = tmp_path / "sweep.yaml"
    config.write_bytes(CONFIG.read_bytes())
    prior = tmp_path / "prediction.json"
    prior.write_bytes(PRIOR.read_bytes())
    before = {p: p.read_bytes() for p in (config, prior)}
    target = config if own == "config" else prior
    argv = ["decide", "--config", str(config), "--check", "--remote", "--prior", str(prior)]
    assert main([*argv, "--json", str(target)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # refused before the check, nothing printed
    assert f"--json {target}: that file is this command's own {target.name}" in captured.err
    assert {p: p.read_bytes() for p in (config, prior)} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prediction.json", "sweep.yaml"]


def test_without_json_nothing_is_written_and_no_plan_line(tmp_path: Path, capsys: Any) -> None:
    assert main([*CHECK, "--prior", str(PRIOR)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith("estimate (from the prior's throughput")
    assert not any(ln.startswith("plan: ") for ln in out)


def test_an_open_loop_plan_has_an_arrivals_floor_without_a_prior(
    tmp_path: Path, capsys: Any
) -> None:
    """Along rates `--check` estimates without `--prior`: each run its 40 s of arrivals
    (the committed open-loop decision's YAML), a floor, written as printed."""
    config = ROOT / "scripts" / "h200" / "moe-open-decide-freeze-h100.yaml"
    path = tmp_path / "plan.json"
    argv = ["decide", "--config", str(config), "--check", "--remote", "--json", str(path)]
    argv += ["--metric", "ttft_ms.p99"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()[:-1]
    est = json.loads(path.read_text())["estimate"]
    assert est["arrivals_only"] is True
    # 7 rates x 2 targets x 2 repeats x 40 s
    assert est["grid"]["measuring_s"] == 7 * 2 * 2 * 40.0
    assert est["grid"]["starts"] == 2
    assert lines[-1] == est["text"]
    assert lines[-1].startswith("estimate (arrivals alone, each run's warm-up and drain left out")
    assert "grid 1,120 s measuring + 2 starts" in lines[-1]


def test_check_with_out_says_what_a_resume_keeps_and_does_next(tmp_path: Path, capsys: Any) -> None:
    """``--check --out DIR`` on the live open-loop decision stopped by a session's device
    time (its committed database as the second session left it: the third session's runs
    taken out): what it holds, the first pass left, what that costs at least, and the next
    measurement. The live run was making ``sglang rate=16 r=1`` when it was stopped (the
    second session's job log's last line; the first session stopped at ``sglang rate=8
    r=1``, which the second measured first), and the third session's resume measured it
    first; the policy now skips it (both kept up at 16: no throughput sign to settle). On the whole database (the decision ended) it says nothing is left.
    Read only."""
    import lzma

    folder = ROOT / "docs" / "results" / "h100" / "moe-open-decide-freeze"
    out = tmp_path / "d"
    out.mkdir()
    (out / "sweep.db").write_bytes(lzma.decompress((folder / "sweep.db.xz").read_bytes()))
    # a database not in WAL mode (as copied or restored): a writer's open would convert it
    import sqlite3

    whole = tmp_path / "whole"
    whole.mkdir()
    (whole / "sweep.db").write_bytes((out / "sweep.db").read_bytes())
    with contextlib.closing(sqlite3.connect(out / "sweep.db")) as con:
        con.execute("PRAGMA journal_mode=DELETE")
        # the third session's runs (2026-12-07 from 09:00 UTC) out: the second's state
        third = "SELECT run_id FROM runs WHERE created_at >= 1796634000"
        assert len(con.execute(third).fetchall()) == 3
        for table in ("requests", "samples", "runs"):
            con.execute(f"DELETE FROM {table} WHERE run_id IN ({third})")
        con.commit()
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.iterdir()}
    config = ROOT / "scripts" / "h200" / "moe-open-decide-freeze-h100.yaml"
    argv = ["decide", "--config", str(config), "--check", "--remote", "--out", str(out)]
    argv += ["--metric", "total_tokens_per_s", "--metric", "ttft_ms.p50"]
    argv += ["--metric", "ttft_ms.p99", "--tie-margin", "0.03", "--json", str(tmp_path / "p.json")]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("resume: "))
    # the live run was measuring sglang rate=16 r=1 when stopped (the logs below): a repeat
    # its throughput's sign asked for. Since a level where both kept up with their
    # arrivals is a tie on throughput (both did at 16), no sign asks for it, and the
    # resume's first pass goes on to 20
    assert lines[start : start + 4] == [
        f"resume: {out} holds 21 runs of this question (vllm 12, sglang 9), kept",
        "  the first pass has 1 run left: sglang 20 r=0",
        "  their arrivals 40 s + 1 start (sglang 106 s) = 2.4 GPU-min at least; then what the "
        "policy asks",
        "  next: sglang rate=20 r=0 (first pass, whole: an open loop's level runs whole (its "
        "arrivals do not wait on what finished, so a stop within it is no wave of a closed "
        "loop))",
    ]
    first = (folder / "job" / "sweep-1796589189.log").read_text().splitlines()[-1]
    assert first == "sglang rate=8 r=1: measuring ..."
    log = folder / "job" / "2026-12-07" / "sweep-1796605129.log"
    lines = log.read_text().splitlines()
    assert lines[-1] == "sglang rate=16 r=1: measuring (a repeat while its engine is up) ..."
    assert next(ln.split(":")[0] for ln in lines if ": measuring (" in ln) == "sglang rate=8 r=1"
    # the third session's resume measured that next, then the first pass's last run
    log = folder / "job" / "2026-12-07b" / "sweep-1796637441.log"
    measured = [ln.split(":")[0] for ln in log.read_text().splitlines() if ": measuring (" in ln]
    assert measured == ["sglang rate=16 r=1", "sglang rate=20 r=0", "sglang rate=20 r=1"]
    resume = json.loads((tmp_path / "p.json").read_text())["resume"]
    assert resume["kept"] == {"vllm": 12, "sglang": 9}
    assert resume["next"]["target"] == "sglang"
    assert (resume["next"]["level"], resume["next"]["repeat"]) == (20.0, 0)
    assert resume["next"]["why"].startswith("first pass, whole")
    # nothing written there: the database's bytes and time as they were, no file beside it
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.iterdir()} == before
    # the whole database: the decision ended, nothing is left to measure
    assert main([*argv[:6], str(whole), *argv[7:]]) == 0
    said = capsys.readouterr().out.splitlines()
    start = next(i for i, ln in enumerate(said) if ln.startswith("resume: "))
    assert said[start : start + 3] == [
        f"resume: {whole} holds 24 runs of this question (vllm 12, sglang 12), kept",
        "  the first pass is whole",
        "  next: nothing: what is kept settles it (the same command prints the answer)",
    ]
    # a folder with no database yet: the decision starts from nothing
    empty = tmp_path / "new"
    assert main([*argv[:6], str(empty), *argv[7:-2]]) == 0
    said = capsys.readouterr().out.splitlines()
    assert (
        said[-1]
        == f"resume: {empty} holds no run of this question: the decision starts from nothing"
    )
    assert not empty.exists()


def test_check_with_out_says_a_live_resume_would_refuse_another_workload(
    tmp_path: Path, capsys: Any
) -> None:
    """A folder holding another workload (here 150 prompt tokens, not the database's 200)
    is refused by the live command; the check says so rather than what it would keep. An
    empty file holds no run."""
    import lzma

    folder = ROOT / "docs" / "results" / "h100" / "moe-open-decide-freeze"
    out = tmp_path / "d"
    out.mkdir()
    (out / "sweep.db").write_bytes(lzma.decompress((folder / "sweep.db.xz").read_bytes()))
    source = (ROOT / "scripts" / "h200" / "moe-open-decide-freeze-h100.yaml").read_text()
    assert "input_tokens: 200\n" in source
    config = tmp_path / "other.yaml"
    config.write_text(source.replace("input_tokens: 200\n", "input_tokens: 150\n"))
    argv = ["decide", "--config", str(config), "--check", "--remote", "--out", str(out)]
    # the check exits as the live command would: 2, its refusal said
    assert main([*argv, "--metric", "ttft_ms.p99"]) == 2
    said = capsys.readouterr()
    assert said.out.splitlines()[-1] == (
        f"resume: {out} holds a sweep with a different workload (input_tokens): the live "
        "command refuses it (another --out, or the same settings to resume)"
    )
    assert said.err.strip() == f"error: {out}: the live decision refuses this folder (said above)"
    # the same workload along concurrency: a folder of rate runs is refused for its axis
    closed = tmp_path / "closed.yaml"
    text = source.replace("rates: [1, 2, 4, 8, 12, 16, 20]\n", "concurrency: [1, 4]\n")
    closed.write_text(text.replace("duration_s_per_level: 40\n", ""))
    along = ["decide", "--config", str(closed), *argv[3:]]
    assert main([*along, "--metric", "ttft_ms.p99"]) == 2
    assert "(axis (its runs are along rate))" in capsys.readouterr().out.splitlines()[-1]
    empty = tmp_path / "e"
    empty.mkdir()
    (empty / "sweep.db").write_bytes(b"")
    argv[-1] = str(empty)
    assert main([*argv, "--metric", "ttft_ms.p99"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("the decision starts from nothing")
    assert (empty / "sweep.db").read_bytes() == b""


def test_check_with_out_says_a_live_resume_would_refuse_changed_target_settings(
    tmp_path: Path, capsys: Any
) -> None:
    """A folder whose SGLang runs were measured without ``freeze_gc`` (as each run's
    ``target_settings`` says) is refused by the live command under the YAML that turns it
    on; the check says so, with the setting as it was and is, and exits 2."""
    import lzma
    import sqlite3

    from crossover.spec.load import Level
    from crossover.sweep.config import load_sweep_config

    folder = ROOT / "docs" / "results" / "h100" / "moe-open-decide-freeze"
    out = tmp_path / "d"
    out.mkdir()
    (out / "sweep.db").write_bytes(lzma.decompress((folder / "sweep.db.xz").read_bytes()))
    config = ROOT / "scripts" / "h200" / "moe-open-decide-freeze-h100.yaml"
    cfg = load_sweep_config(config)
    # (under a duration every rate's settings are alike: one stands for all)
    held = cfg.target_settings(cfg.target_named("sglang"), Level("rate", 1))
    held["launch.freeze_gc"] = False

    def keep(settings: dict[str, Any]) -> None:  # as the SGLang runs would have kept them
        with sqlite3.connect(out / "sweep.db") as db:
            db.execute(
                "UPDATE runs SET context = json_set(context, '$.target_settings', json(?)) "
                "WHERE key LIKE 'sglang|%'",
                (json.dumps(settings),),
            )

    keep(held)
    argv = ["decide", "--config", str(config), "--check", "--remote", "--out", str(out)]
    plan = tmp_path / "p.json"
    assert main([*argv, "--metric", "ttft_ms.p99", "--json", str(plan)]) == 2
    said = capsys.readouterr()
    assert said.out.splitlines()[-2] == (
        f"resume: the live command refuses this folder: {out} holds runs measured with "
        "other settings: sglang (launch.freeze_gc false -> true); use another --out, the "
        f"settings they were measured with, or measure it again with crossover sweep --out "
        f"{out} --only sglang --redo sglang and the same --config"
    )
    assert said.err.strip() == f"error: {out}: the live decision refuses this folder (said above)"
    resume = json.loads(plan.read_text())["resume"]
    assert resume["settings_changed"] == {"sglang": ["launch.freeze_gc false -> true"]}
    assert resume["next"] is None
    # as they were measured: the check goes on to what it keeps
    keep({**held, "launch.freeze_gc": True})
    assert main([*argv, "--metric", "ttft_ms.p99"]) == 0
    assert "of this question (vllm 12, sglang 12), kept" in capsys.readouterr().out


def test_check_with_out_on_a_packed_folder_or_a_file_is_one_line(
    tmp_path: Path, capsys: Any
) -> None:
    """A committed folder holds its database packed (sweep.db.xz): a live decision there
    would start a new database beside it, so it and its check refuse it, naming the unpack;
    an --out that is a file is said to be one."""
    folder = tmp_path / "committed"
    folder.mkdir()
    (folder / "sweep.db.xz").write_bytes(b"packed")
    config = ROOT / "scripts" / "h200" / "moe-open-decide-freeze-h100.yaml"
    argv = ["decide", "--config", str(config), "--check", "--remote", "--out", str(folder)]
    assert main([*argv, "--metric", "ttft_ms.p99"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"error: {folder} holds its database packed (sweep.db.xz) and no sweep.db: unpack it "
        f"to resume (xz -dk {folder / 'sweep.db.xz'}), or write the results elsewhere"
    ]
    afile = tmp_path / "afile"
    afile.write_text("x")
    argv[-1] = str(afile)
    assert main([*argv, "--metric", "ttft_ms.p99"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {afile}: a file, not a folder for results"]


def test_check_with_out_under_a_budget_says_the_budget_stopped_it(
    tmp_path: Path, capsys: Any
) -> None:
    """The H100 warm decision's database under --budget 0.35: the budget, not the answer,
    leaves nothing next, and the check says so (it read "what is kept settles it")."""
    import lzma

    folder = ROOT / "docs" / "results" / "h100" / "moe-warm-decide"
    out = tmp_path / "d"
    out.mkdir()
    (out / "sweep.db").write_bytes(lzma.decompress((folder / "sweep.db.xz").read_bytes()))
    config = ROOT / "scripts" / "h200" / "moe-a-warm-h100.yaml"
    prior = ROOT / "docs" / "results" / "h100" / "moe-warm-grid" / "prediction.json"
    argv = ["decide", "--config", str(config), "--check", "--remote", "--out", str(out)]
    argv += ["--prior", str(prior), "--json", str(tmp_path / "p.json")]
    assert main([*argv, "--budget", "0.35"]) == 0
    last = capsys.readouterr().out.splitlines()[-2]
    assert last == (
        "  next: nothing within the time budget: it defers 2 measurements (the same command "
        "prints the answer and says which)"
    )
    assert json.loads((tmp_path / "p.json").read_text())["resume"]["deferred"] == 2
    assert main(argv) == 0
    assert "next: nothing within the time budget" not in capsys.readouterr().out


def test_a_prior_of_other_targets_or_another_workload_is_said(tmp_path: Path, capsys: Any) -> None:
    """The MoE forecast given to the dense sweep A (whose targets it mostly does not name)
    says which targets it does not forecast; one of another workload says so too; the
    MoE YAML's own forecast says nothing."""
    prior = ROOT / "docs" / "results" / "h200" / "moe" / "prediction.json"
    argv = ["decide", "--check", "--remote", "--prior", str(prior), "--config"]
    assert main([*argv, str(ROOT / "scripts" / "h200" / "sweep-a.yaml")]) == 0
    notes = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("note: ")]
    assert notes == [
        "note: --prior forecasts no llamacpp-graphs, vllm-eager, llamacpp-graphs-nocache, "
        "llamacpp-nographs, transformers-cb-graphs (it forecasts llamacpp-q8, sglang, vllm, "
        "vllm-fp8): those are placed on no prediction"
    ]
    source = (ROOT / "scripts" / "h200" / "moe-a-warm.yaml").read_text()
    assert main([*argv, str(ROOT / "scripts" / "h200" / "moe-a-warm.yaml")]) == 0
    assert "note: " not in capsys.readouterr().err
    other = tmp_path / "other.yaml"
    other.write_text(source.replace("input_tokens: 200\n", "input_tokens: 100\n"))
    assert main([*argv, str(other)]) == 0
    assert (
        "note: --prior forecasts 200 prompt and 256 generated tokens a request; this sweep's "
        "are 100 and 256: where it looks first may be off"
    ) in capsys.readouterr().err
