"""``crossover decide --config`` on the CPU (issue 42's third proof): the README's two
calibration servers, ``fast`` and ``batched``, whose throughputs cross at c = 7.2 (known in
closed form from their latency model), found inside the decision's interval from a third of
the requests the sweep of the same YAML measures. Real servers, real HTTP, the sweep's own
database; a second run resumes from it and measures nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from pathlib import Path

import pytest
import yaml
from tests.ggufs import stand_in_gguf

from crossover.calibration.server import build_config, spawn
from crossover.cli.app import main
from crossover.records.store import Store
from crossover.sweep.config import SweepConfig, load_sweep_config
from crossover.sweep.driver import part_of

pytestmark = pytest.mark.slow

N = 32  # output tokens per request, as the README's sweep
#: the servers' settings, a config file's mapping (``build_config``'s ``base``)
FAST: dict[str, object] = {"ttft_ms": 20.0, "itl_ms": 2.0, "itl_per_stream_ms": 0.8}
BATCHED: dict[str, object] = {"ttft_ms": 40.0, "itl_ms": 6.0, "itl_per_stream_ms": 0.05}
#: equal request times (so equal tokens/s): 20 + 31 (2 + 0.8 (c - 1)) = 40 + 31 (6 + 0.05 (c - 1))
TRUTH = 1.0 + ((40.0 - 20.0) / (N - 1) + 6.0 - 2.0) / (0.8 - 0.05)
#: the closed form assumes every token sees exactly c - 1 other streams, which a busy
#: 2-core machine bends by a few percent (tests/sweep/test_sweep_crossover.py: MODEL_SLACK)
SLACK = 0.08


def _two_servers(
    tmp_path: Path, name: str, levels: list[int], fast: str, batched: str
) -> SweepConfig:
    """A sweep YAML of the two calibration servers, 24 requests a level, one repeat."""
    config = tmp_path / "sweep.yaml"
    target = {"engine": "vllm", "model": "calib"}
    config.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "concurrency": levels,
                "output_tokens": N,
                "requests_per_level": 24,
                "repeats": 1,
                "targets": [
                    {"name": "fast", "url": fast, **target},
                    {"name": "batched", "url": batched, **target},
                ],
            }
        )
    )
    return load_sweep_config(config)


def test_truth_is_the_readmes() -> None:
    assert round(TRUTH, 1) == 7.2


def test_decide_finds_the_readme_crossover_with_a_third_of_the_requests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with contextlib.ExitStack() as stack:
        fast = stack.enter_context(spawn(build_config(FAST)))
        batched = stack.enter_context(spawn(build_config(BATCHED)))
        config = tmp_path / "sweep.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "name": "fast-vs-batched",
                    # a user who does not know where they cross sweeps 1-64
                    "concurrency": [1, 2, 4, 8, 16, 32, 64],
                    "output_tokens": N,
                    "repeats": 2,
                    "targets": [
                        {"name": "fast", "url": fast, "engine": "vllm", "model": "calib"},
                        {"name": "batched", "url": batched, "engine": "vllm", "model": "calib"},
                    ],
                }
            )
        )
        out = tmp_path / "d"
        argv = ["decide", "--config", str(config), "--out", str(out)]
        argv += ["--metric", "total_tokens_per_s", "--json", str(tmp_path / "d.json")]
        assert main(argv) == 0
        printed, printed_err = capsys.readouterr()
        # run again: everything is kept from the database, nothing measured, same answer
        assert main(argv) == 0
        again, again_err = capsys.readouterr()
    decision = json.loads((tmp_path / "d.json").read_text())
    # where it was measured, with the answer
    assert [h["cpus"] for h in decision["live"]["hosts"]] == [os.cpu_count()]
    # the same answer beside the records, and `crossover report` leads with it
    assert json.loads((out / "decision.json").read_text()) == decision
    assert f"decision: {out / 'decision.json'}" in printed
    assert main(["report", str(out)]) == 0
    html = (out / "report.html").read_text()
    head = html.split('<h2 id="findings">')[0]
    assert '<h2 id="decision">Decision</h2>' in head
    assert "where the targets cross on total tokens/s (fast, batched)" in head
    assert "fast leads below" in head and "Not measured, and why:" in head
    assert "assumes throughput does not fall" in head and "GPU time:" in head
    xs = [f for f in decision["findings"] if f["kind"] == "crossover"]
    assert len(xs) == 1, printed
    x = xs[0]
    assert (x["below"], x["above"]) == ("fast", "batched")
    lo, hi = x["interval"]
    assert lo - SLACK * TRUTH <= TRUTH <= hi + SLACK * TRUTH, printed
    # the sweep of the same YAML: every target, level and repeat
    cfg = load_sweep_config(config)
    grid = sum(cfg.requests_for(c) or 0 for c in cfg.concurrency or []) * 2 * cfg.repeats
    with Store(out / "sweep.db") as store:
        runs = [r for r in store.runs() if r.status == "done"]
        measured = sum(len(store.records(r.run_id, include_warmup=False)) for r in runs)
    assert 0 < measured <= grid / 3, (measured, grid)
    # what it did not measure, and why; the time per target; the sweep's own files
    assert "not measured:" in printed
    assert "fast at 32,64" in printed or "fast at 64" in printed
    assert "assumes throughput does not fall" in printed
    assert "GPU time per target" in printed and "GPU-minutes), measured" in printed
    assert (out / "sweep.json").is_file()
    assert "fast leads below" in again
    assert f"({len({r.key for r in runs})} kept from before)" in again
    # the kept runs said as a sweep says them: one line per target, not one per run
    kept_lines = [ln for ln in again_err.splitlines() if "done earlier, kept" in ln]
    assert sorted(ln.split(":")[0] for ln in kept_lines) == ["batched", "fast"], again_err
    # each level and repeat once (a part measured again whole is two runs of one key)
    kept_runs = sum(int(ln.split(": ")[1].split()[0]) for ln in kept_lines)
    assert kept_runs == len({r.key for r in runs})
    assert "done earlier" not in printed_err
    # each level says why it is measured as it starts: the first pass's, then the policy's
    # own reasons (a bracket, a repeat), one start line per run measured
    starts = [ln for ln in printed_err.splitlines() if ": measuring (" in ln]
    assert len(starts) == len(runs), printed_err
    assert all(ln.endswith(") ...") for ln in starts)
    assert starts[0].startswith("fast c=1 r=0: measuring (first pass")
    assert any("first pass" not in ln for ln in starts), printed_err
    # "10 levels measured" holds the words too: the count must be its own number
    assert "; 0 levels measured" not in printed


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["decide"], "give --config sweep.yaml (live) or --replay sweep.db"),
        (["decide", "--replay", "x.db", "--question", "why"], "--question why"),
        (["decide", "--replay", "x.db", "--metric", "speed"], "--metric speed"),
        (["decide", "--replay", "x.db", "--question", "lead"], "needs --at"),
        (["decide", "--replay", "x.db", "--question", "capacity"], "needs --slo"),
        (["decide", "--replay", "x.db", "--slo", "ttft<500"], "METRIC<=LIMIT"),
        (["decide", "--replay", "x.db", "--at", "1,64"], "--at is for --question lead"),
        (
            ["decide", "--replay", "x.db", "--slo", "ttft_ms.p99<=500"],
            "--slo is for --question capacity",
        ),
        (
            ["decide", "--replay", "x.db", "--question", "capacity", "--slo", "ttft_ms.p99>=3"],
            "a ceiling: METRIC<=LIMIT",
        ),
        (["decide", "--replay", "nowhere.db"], "no such database"),
        (["decide", "--config", "nowhere.yaml"], "--out DIR is required"),
        (["decide", "--replay", "x.db", "--remote"], "--remote goes with --check"),
        (["decide", "--replay", "x.db", "--check"], "--check goes with --config"),
        (["decide", "--replay", "x.db", "--budget", "2"], "--budget 2"),
    ],
)
def test_bad_input_is_one_line(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with contextlib.chdir(tmp_path):
        assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


ENGINE = Path(__file__).resolve().parents[1] / "sweep" / "calib_engine.py"


def test_launched_engines_start_once_each_and_are_stopped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Targets that launch an engine (the calibration server dressed as llama-server) are
    measured target by target: one start each, the engine kept up between its levels and
    repeats, and stopped before the next target's starts (one GPU)."""
    from tests.engines.conftest import processes_mentioning

    targets = []
    for name, settings in (("fast", FAST), ("batched", BATCHED)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(settings))
        model = tmp_path / f"{name}.gguf"
        stand_in_gguf(model)
        targets.append(
            {
                "name": name,
                "model": "calibration",
                "launch": {
                    "engine": "llamacpp",
                    "model": str(model),
                    "executable": [sys.executable, str(ENGINE)],
                    "parallel": 64,
                    "health_timeout_s": 30,
                    "env": {"CALIB_ENGINE_CONFIG": str(path), "CALIB_ENGINE_LOAD_S": "1"},
                },
            }
        )
    config = tmp_path / "sweep.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "name": "launched",
                "concurrency": [1, 4, 16],
                "output_tokens": N,
                "repeats": 2,
                "targets": targets,
            }
        )
    )
    out = tmp_path / "d"
    rc = main(["decide", "--config", str(config), "--out", str(out), "--json",
               str(tmp_path / "d.json"), "--tie-margin", "0.03"])  # fmt: skip
    printed, err = capsys.readouterr()
    assert rc == 0, printed
    # each engine, as it is stopped, says its time up and the decision's so far (stderr)
    said = [ln for ln in err.splitlines() if "GPU-minutes so far in all" in ln]
    assert [ln.split(":")[0] for ln in said] == ["fast", "batched"], err
    assert all(": stopped; its engine up " in ln and "(1 start)" in ln for ln in said), said
    # the sweep folder's own analysis is read with the decision's margin, and says so
    assert json.loads((out / "sweep.json").read_text())["tie_margin"] == 0.03
    live = json.loads((tmp_path / "d.json").read_text())["live"]
    times = live["times"]
    # the GPU time per target: each engine from its start to its stop, measured
    assert set(live["gpu_time"]["per_target"]) == {"fast", "batched"}
    for t, gpu_s in live["gpu_time"]["per_target"].items():
        assert gpu_s >= times[t]["measuring_s"] > 0
    assert {t: v["starts"] for t, v in times.items()} == {"fast": 1, "batched": 1}
    assert all(v["launched"] for v in times.values())
    assert "1 engine start (ready after " in printed
    # inside that time: each start's seconds to ready (past its 1 s model load) and stop
    for t, v in times.items():
        (ready,) = v["ready_s"]
        (stop,) = v["stop_s"]
        assert 1.0 <= ready <= live["gpu_time"]["per_target"][t] - times[t]["measuring_s"]
        assert 0 <= stop < 15
    assert printed.count("1 engine start (ready after ") == 2, printed
    # each engine's log holds one launch: started once, never restarted
    for name in ("fast", "batched"):
        logs = list((out / "engines").glob(f"{name}*.log"))
        heads = [
            line
            for log in logs
            for line in log.read_text().splitlines()
            if line.startswith("# crossover-launch: ")
        ]
        assert len(heads) == 1, (name, heads)
    assert processes_mentioning(str(ENGINE)) == []


def test_a_sequential_level_stops_once_settled_and_resume_continues_it(tmp_path: Path) -> None:
    """A later target's level is sequential: batched at c = 1 (2.7x slower than fast there)
    stops after its first requests, a valid run of the requests it sent with the requests
    planned and why it stopped kept; run again, it is read back as a part and kept. Asked
    again with a margin the part no longer settles, the rest is measured: the level
    again, whole, under the same key (the newer run stands, the part stays stored)."""
    import asyncio

    from crossover.decide.live import decide_live, question_for
    from crossover.decide.state import PolicyConfig
    from crossover.sweep.driver import SEQUENTIAL_STOP

    with contextlib.ExitStack() as stack:
        fast = stack.enter_context(spawn(build_config(FAST)))
        batched = stack.enter_context(spawn(build_config(BATCHED)))
        cfg = _two_servers(tmp_path, "sequential", [1, 2], fast, batched)
        q = question_for(cfg, "crossover", ["total_tokens_per_s"])
        out = tmp_path / "d"
        out.mkdir()
        first = asyncio.run(decide_live(cfg, out, q))
        with Store(out / "sweep.db") as store:
            runs = {r.key: r for r in store.runs() if r.status == "done"}
            stopped = runs["batched|c=1|r=0"]
            sent = len(store.records(stopped.run_id, include_warmup=False))
            samples = [d for s, _, d in store.samples(stopped.run_id) if s == SEQUENTIAL_STOP]
            whole = len(store.records(runs["fast|c=1|r=0"].run_id, include_warmup=False))
        # the reference is whole; the later target stopped after a wave, well before 24
        assert whole == 24
        assert 4 <= sent < 24
        assert (
            samples and samples[0]["planned"] == 24 and "stopped sending once" in samples[0]["why"]
        )
        assert (stopped.summary or {})["verdict"] == "valid"
        assert (stopped.summary or {})["requests"]["sent"] == sent
        assert first.times["batched"].stopped
        # sweep.json and the report say it is a part, of how many, and why
        part = next(r for r in first.sweep.runs if (r.target, r.level) == ("batched", 1)).part
        assert part is not None and part.planned == 24 and "stopped sending once" in part.why
        from crossover.report import load_sweep, write_report

        html = write_report(out, load_sweep(out)).read_text()
        assert f"a part: {sent} of 24 requests sent (stopped sending once" in html
        assert all(r.part is None for r in first.sweep.runs if r.target == "fast")
        # the same question again: read back (a part, settled), nothing measured
        again = asyncio.run(decide_live(cfg, out, q))
        assert again.steps == [] and again.kept == len(runs)
        # a question the part does not settle (a 300% margin): the rest, the level again
        strict = PolicyConfig(partial_margin=3.0)
        more = asyncio.run(decide_live(cfg, out, q, strict))
        # and once more: the level's two runs (the part, then the whole) are one level kept
        last = asyncio.run(decide_live(cfg, out, q, strict))
    assert [(m.target, m.level, m.budget_s, m.sequential) for m in more.steps][:1] == [
        ("batched", 1, None, False)
    ]
    with Store(out / "sweep.db") as store:
        keyed = [r for r in store.runs() if r.key == "batched|c=1|r=0" and r.status == "done"]
        assert len(keyed) == 2  # the part stays stored
        latest = store.finished_by_key("batched|c=1|r=0")
        assert latest is not None and latest.run_id != stopped.run_id
        assert len(store.records(latest.run_id, include_warmup=False)) == 24
        keys = {r.key for r in store.runs() if r.status == "done"}
    assert last.steps == [] and last.kept == len(keys)
    sweep = json.loads((out / "sweep.json").read_text())
    run = next(r for r in sweep["runs"] if r["target"] == "batched" and r["concurrency"] == 1)
    assert run["summary"]["requests"]["sent"] == 24
    assert run["part"] is None  # the whole level stands now


def test_check_passes_the_h200_moe_decision_here_and_prints_its_plan(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Proof 2's YAML, checked as on the H200 (its paths are that machine's): it passes,
    measures nothing, and the plan starts from the prior's predicted leader."""
    root = Path(__file__).resolve().parents[2]
    config = root / "scripts" / "h200" / "decide-moe-a.yaml"
    prior = root / "docs" / "results" / "h200" / "moe" / "prediction.json"
    argv = ["decide", "--config", str(config), "--check", "--remote", "--prior", str(prior)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "OK, 3 target(s) checked; nothing measured" in printed
    assert "the grid is 54 levels" in printed
    assert "reference vllm (the prior's predicted leader)" in printed
    assert "  vllm: 1,4,16,64,256\n" in printed  # 512: vllm's alone
    assert "  llamacpp-q8: 1,4,16,64\n" in printed


def test_a_started_engine_is_weighed_at_its_own_start() -> None:
    """Live, once a target's engine has started, a budget weighs a restart of it at what
    its latest start took (to ready, and its stop once timed)."""
    from typing import Any, cast

    from crossover.analysis.schema import EngineStart
    from crossover.decide.live import _with_start_cost
    from crossover.decide.state import PolicyConfig

    class Runner:
        def __init__(self) -> None:
            self.starts: list[EngineStart] = []

        def engine_starts(self) -> list[EngineStart]:
            return self.starts

    runner = Runner()
    policy = PolicyConfig(budget=0.5, start_s=100.0)
    assert _with_start_cost(policy, cast(Any, runner), "a") is policy  # nothing started
    runner.starts = [
        EngineStart(target="a", started_at="2026-12-05T08:00:00+00:00", ready_s=30.0, stop_s=1.0),
        EngineStart(target="a", started_at="2026-12-05T08:05:00+00:00", ready_s=12.0),
        EngineStart(target="b", started_at="2026-12-05T08:06:00+00:00", ready_s=60.0),
    ]
    got = _with_start_cost(policy, cast(Any, runner), "a")
    assert got.start_cost("a") == 12.0  # the latest start, its stop not yet timed
    assert got.start_cost("b") == 100.0  # b's is weighed once the policy has looked at it
    assert _with_start_cost(got, cast(Any, runner), "b").start_cost("b") == 60.0


def test_a_decision_with_invalid_runs_exits_3_unless_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A target whose every request failed (its runs invalid) left every question
    unanswered ("no concurrency level with valid runs of both"), and decide said 0; a
    sweep of the same YAML says 3."""
    from crossover.calibration.config import CalibrationConfig, FaultSpec

    broken = CalibrationConfig(faults=[FaultSpec(name="http_500")])
    with spawn(CalibrationConfig(itl_ms=2.0)) as good, spawn(broken) as bad:
        config = tmp_path / "sweep.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "concurrency": [1, 2],
                    "output_tokens": 4,
                    "requests_per_level": 4,
                    "targets": [
                        {"name": "good", "url": good, "model": "calib"},
                        {"name": "bad", "url": bad, "model": "calib"},
                    ],
                }
            )
        )
        argv = ["decide", "--config", str(config), "--out", str(tmp_path / "d")]
        assert main(argv) == 3
        assert "--allow-invalid" in capsys.readouterr().err.splitlines()[-1]
        assert main([*argv, "--allow-invalid"]) == 0


def test_a_level_that_fails_when_measured_again_whole_is_not_asked_for_forever(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A part's rest measured again whole, and that run fails (an engine gone, every
    request refused): the failure is the level's answer. Read back, the older part would
    ask for the rest again, and again: a GPU's level measured a thousand times."""
    import asyncio

    from crossover.decide.live import decide_live, question_for
    from crossover.decide.state import PolicyConfig
    from crossover.sweep.driver import SweepRunner

    with contextlib.ExitStack() as stack:
        fast = stack.enter_context(spawn(build_config(FAST)))
        batched = stack.enter_context(spawn(build_config(BATCHED)))
        cfg = _two_servers(tmp_path, "fails-again", [1], fast, batched)
        q = question_for(cfg, "crossover", ["total_tokens_per_s"])
        out = tmp_path / "d"
        out.mkdir()
        asyncio.run(decide_live(cfg, out, q))  # batched c=1 stops early: a part
        measured: list[bool] = []
        real = SweepRunner.measure_level

        async def failing_again(self: SweepRunner, *a: object, again: bool = False) -> bool:
            measured.append(again)
            if again:
                return False  # the whole level failed: nothing new is stored
            return await real(self, *a, again=again)  # type: ignore[arg-type]

        monkeypatch.setattr(SweepRunner, "measure_level", failing_again)
        result = asyncio.run(decide_live(cfg, out, q, PolicyConfig(partial_margin=3.0)))
    assert measured == [True]  # the rest asked once, failed, not asked again
    assert [(m.target, m.level) for m in result.steps] == [("batched", 1)]


def test_the_question_knows_each_levels_requests_and_a_duration_sweeps_none() -> None:
    """A live decision's question holds each level's measured requests (the sweep's own
    ``requests_for``), so a first-pass level of two waves is said to be measured whole;
    a sweep held for a duration has no such count."""
    from crossover.decide.live import question_for

    def config(**over: object) -> SweepConfig:
        target = {"engine": "vllm", "model": "m"}
        return SweepConfig.model_validate(
            {
                "concurrency": [1, 4, 16],
                "output_tokens": N,
                "targets": [{"name": "a", "url": "http://a", **target},
                            {"name": "b", "url": "http://b", **target}],
                **over,
            }
        )  # fmt: skip

    q = question_for(config(requests_per_concurrency=2, min_requests_per_level=4), "crossover",
                     ["total_tokens_per_s"])  # fmt: skip
    assert q.requests == {1: 4, 4: 8, 16: 32}
    q = question_for(config(duration_s_per_level=10), "crossover", ["total_tokens_per_s"])
    assert q.requests == {}


def test_decide_along_rates_against_two_calibration_servers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An open-loop decision (``rates:``): the same policy along requests/s, every level
    whole, rate runs in the sweep folder, read back on resume, and ``crossover report``
    on the folder. ``fast`` answers its first token in 20 ms, ``batched`` in 40 ms: at a
    few requests/s neither queues, so fast leads on TTFT p50 at every rate."""
    with contextlib.ExitStack() as stack:
        fast = stack.enter_context(spawn(build_config(FAST)))
        batched = stack.enter_context(spawn(build_config(BATCHED)))
        config = tmp_path / "rates.yaml"
        target = {"engine": "vllm", "model": "calib"}
        config.write_text(
            yaml.safe_dump(
                {
                    "name": "fast-vs-batched-open",
                    "rates": [4, 8, 16],
                    "output_tokens": N,
                    "requests_per_level": 12,
                    "repeats": 1,
                    "targets": [
                        {"name": "fast", "url": fast, **target},
                        {"name": "batched", "url": batched, **target},
                    ],
                }
            )
        )
        out = tmp_path / "d"
        argv = ["decide", "--config", str(config), "--out", str(out)]
        argv += ["--metric", "ttft_ms.p50", "--json", str(tmp_path / "d.json")]
        assert main(argv) == 0
        printed = capsys.readouterr().out
        assert main(argv) == 0  # again: every level kept, nothing measured
        again = capsys.readouterr().out
    decision = json.loads((tmp_path / "d.json").read_text())
    assert decision["question"]["axis"] == "rate"
    assert decision["question"]["levels"] == [4.0, 8.0, 16.0]
    (f,) = decision["findings"]
    assert (f["kind"], f["leader"], f["axis"]) == ("none", "fast", "rate"), printed
    assert "TTFT p50: fast leads batched over 4-16 requests/s" in printed
    assert "along arrival rates (open loop)" in printed
    with Store(out / "sweep.db") as store:
        keys = sorted(r.key or "" for r in store.runs() if r.status == "done")
        parts = [part_of(store.samples(r.run_id)) for r in store.runs()]
    assert keys == sorted(f"{t}|rate={r}|r=0" for t in ("fast", "batched") for r in (4, 8, 16)), (
        keys
    )
    # whole levels: no run was stopped within
    assert parts == [None] * 6
    sweep = json.loads((out / "sweep.json").read_text())
    assert {r["rate"] for r in sweep["runs"]} == {4.0, 8.0, 16.0}
    assert all(r["concurrency"] is None and r.get("part") is None for r in sweep["runs"])
    assert "fast leads batched over 4-16 requests/s" in again
    assert "; 0 levels measured of the grid's 6 (6 kept from before)" in again
    # each target's line says it measured nothing this time, not "0.0 s wall, levels none"
    assert "  fast: nothing measured this time" in again.splitlines()
    assert "levels none" not in again
    assert main(["report", str(out)]) == 0
    html = (out / "report.html").read_text()
    head = html.split('<h2 id="findings">')[0]
    assert '<h2 id="decision">Decision</h2>' in head
    assert "fast leads batched over 4-16 requests/s" in head
    assert "where the targets cross along arrival rates (open loop) on TTFT p50" in head
    # rates as given (4, not 4.0), in the answer's lines as in the report
    # (a rate as 4.0 anywhere but in a longer number or a time such as "14.0 s" or
    # "4.0 s wall", which a slow machine prints)
    as_float = re.compile(r"(?<![\d.])(?:4|8|16)\.0(?!\d)(?! s\b)")
    assert "s measuring, levels 4,8,16" in printed and not as_float.search(printed), printed
    assert not as_float.search(head), as_float.findall(head)


def test_a_live_decision_on_a_server_upgraded_since_stops_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A decision resumed against a server that answers another version than its kept
    runs were measured with stops at its first level there (exit 2), naming the runs,
    both versions and the sweep command that measures it again; nothing of it is kept."""
    out = tmp_path / "d"
    argv = ["decide", "--config", str(tmp_path / "sweep.yaml"), "--out", str(out)]
    argv += ["--metric", "total_tokens_per_s"]
    with contextlib.ExitStack() as stack:
        fast = stack.enter_context(spawn(build_config({**FAST, "version": "0.26.0"})))
        batched = stack.enter_context(spawn(build_config({**BATCHED, "version": "0.26.0"})))
        _two_servers(tmp_path, "upgrade", [1, 4], fast, batched)
        assert main(argv) == 0, capsys.readouterr().err
    with Store(out / "sweep.db", read_only=True) as store:
        runs = len(store.runs())
    with contextlib.ExitStack() as stack:
        fast = stack.enter_context(spawn(build_config({**FAST, "version": "0.26.1"})))
        batched = stack.enter_context(spawn(build_config({**BATCHED, "version": "0.26.1"})))
        _two_servers(tmp_path, "upgrade", [1, 4, 8], fast, batched)
        capsys.readouterr()
        assert main(argv) == 2
    err = " ".join(capsys.readouterr().err.split())
    # the first target the policy asks for stops it (both were upgraded)
    said = re.search(r"holds runs of (fast|batched) measured with its engine at 0\.26\.0", err)
    assert said is not None, err
    assert "and its server answers 0.26.1 now: a level would mix two versions" in err, err
    who = said.group(1)
    assert f"crossover sweep --out {out} --only {who} --redo {who}" in err, err
    with Store(out / "sweep.db", read_only=True) as store:
        assert len(store.runs()) == runs


def test_a_target_launched_frozen_has_its_pauses_frozen(tmp_path: Path) -> None:
    """The committed open-loop decision's YAML launches SGLang with freeze_gc: true: where
    its log holds no line of the freeze's request (an engine logging no access lines), its
    pauses are marked frozen (the notes name no freeze as their remedy), vLLM's are not;
    where the log holds them, what it says stands (a refused freeze froze nothing)."""
    from datetime import UTC, datetime

    from crossover.analysis.gc import GcPause, GcRun
    from crossover.decide.live import frozen_by_launch

    root = Path(__file__).resolve().parents[2]
    cfg = load_sweep_config(root / "scripts" / "h200" / "moe-open-decide-freeze-h100.yaml")
    at = datetime(2026, 12, 7, 10, 5, 10, tzinfo=UTC)
    pause = GcPause("x.log", 1, at, 0.05, 2)
    runs = [GcRun(t, "rate=20", 20.0, 1, (pause,), (True,), "E", at) for t in ("vllm", "sglang")]
    assert [(x.target, x.frozen) for x in frozen_by_launch(cfg, runs, tmp_path)] == [
        ("vllm", False),
        ("sglang", True),
    ]
    (tmp_path / "engines").mkdir()
    refused = '127.0.0.1:36720 - "POST /freeze_gc HTTP/1.1" 404 Not Found\n'
    (tmp_path / "engines" / "sglang.log").write_text(refused)
    assert [x.frozen for x in frozen_by_launch(cfg, runs, tmp_path)] == [False, False]
    # a gzipped earlier start's log counts alike
    import gzip

    (tmp_path / "engines" / "sglang.log").unlink()
    (tmp_path / "engines" / "sglang.20261207T010145.log.gz").write_bytes(
        gzip.compress(refused.encode())
    )
    assert [x.frozen for x in frozen_by_launch(cfg, runs, tmp_path)] == [False, False]
