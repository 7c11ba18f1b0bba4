"""A sweep with per-request lengths and shared prefixes: every target gets the same drawn
work at a level and repeat, the shape is recorded, and a resume with another shape is
refused instead of mixing two workloads in one database."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from crossover.cli.app import main
from crossover.records.store import Store

from .conftest import Linear, read_sweep, servers


def test_drawn_lengths_matched_across_targets_and_resume_refuses_another_shape(
    tmp_path: Path, capsys: object
) -> None:
    out = tmp_path / "sweep"
    config = tmp_path / "sweep.yaml"
    with servers(Linear(1.0, 0.1), Linear(2.0, 0.0)) as (ua, ub):
        config.write_text(
            "concurrency: [1, 2]\nrequests_per_level: 6\nrepeats: 1\nwarmup_requests: 0\n"
            "output_tokens: uniform:2-9\ninput_tokens: normal:12,4,4-30\nshared_prefix: 2x8\n"
            f"targets:\n  - {{name: A, url: '{ua}', engine: vllm, model: calibration}}\n"
            f"  - {{name: B, url: '{ub}', engine: vllm, model: calibration}}\n"
        )
        args = ["sweep", "--config", str(config), "--out", str(out), "--no-report"]
        assert main(args) == 0
        sweep = read_sweep(out)
        assert sweep["workload"]["output_lengths"] == "uniform:2-9"
        assert sweep["workload"]["shared_prefix"] == "2x8"
        assert all(r["summary"]["verdict"] == "valid" for r in sweep["runs"])
        work: dict[tuple[str, str], list[tuple[int, int, int | None]]] = defaultdict(list)
        with Store(out / "sweep.db") as store:
            for row in store.runs():
                assert row.key is not None
                name, level, rep = row.key.split("|")
                for rec in store.records(row.run_id, include_warmup=False):
                    assert rec.completion_tokens == rec.expected_output_tokens
                    work[(name, level + rep)].append(
                        (rec.index, rec.expected_output_tokens, rec.expected_prompt_tokens)
                    )
        for key in {k for _, k in work}:
            assert sorted(work[("A", key)]) == sorted(work[("B", key)]), key
        assert len({n for v in work.values() for _, n, _ in v}) > 3

        # the same folder with another output shape: refused, nothing written
        config.write_text(config.read_text().replace("uniform:2-9", "uniform:2-12"))
        assert main(args) == 2
        err = capsys.readouterr().err  # type: ignore[attr-defined]
        assert "different workload (output_tokens, output_lengths)" in err


def test_a_sweep_of_sessions_counts_sessions_per_level(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    config = tmp_path / "sweep.yaml"
    with servers(Linear(1.0, 0.1)) as (ua,):
        config.write_text(
            "concurrency: [1, 2]\nrequests_per_level: 5\nwarmup_requests: 0\n"
            "output_tokens: 4\ninput_tokens: 6\nsessions: {turns: 3, think_s: 0.01}\n"
            f"targets:\n  - {{name: A, url: '{ua}', engine: vllm, model: calibration}}\n"
        )
        args = ["sweep", "--config", str(config), "--out", str(out), "--no-report"]
        assert main(args) == 0
    sweep = read_sweep(out)
    assert sweep["workload"]["sessions"] == "3 turns, think 0.01 s"
    for run in sweep["runs"]:
        s = run["summary"]
        assert s["verdict"] == "valid"
        assert [t["prompt_tokens"]["mean"] for t in s["turns"]] == [6, 16, 26]
    # each level's slice of prompts starts at a session's first turn (5 requests: the
    # second level's at 6, not 5), so request i sends turn i mod 3's prompt
    with Store(out / "sweep.db") as store:
        for row in store.runs():
            for rec in store.records(row.run_id, include_warmup=False):
                assert (rec.prompt_id or 0) % 3 == rec.index % 3


def test_a_trace_sweep_scales_the_trace_to_each_rate(tmp_path: Path) -> None:
    from crossover.workload.trace import read_trace

    sample = Path(__file__).resolve().parents[2] / "docs" / "examples" / "trace-sample.jsonl"
    mean = read_trace(sample).mean_rate(1.0)
    out = tmp_path / "sweep"
    config = tmp_path / "sweep.yaml"
    with servers(Linear(1.0, 0.0)) as (ua,):
        config.write_text(
            f"rates: [{4 * mean:.4f}, {8 * mean:.4f}]\nrequests_per_level: 10\n"
            f"warmup_requests: 0\ntrace: {sample}\ntrace_block_tokens: 16\n"
            f"targets:\n  - {{name: A, url: '{ua}', engine: vllm, model: calibration}}\n"
        )
        args = ["sweep", "--config", str(config), "--out", str(out), "--no-report"]
        assert main(args) == 0
    sweep = read_sweep(out)
    assert sweep["workload"]["trace"] == str(sample)
    speeds = []
    trace = read_trace(sample)
    with Store(out / "sweep.db") as store:
        for row in sorted(store.runs(), key=lambda r: r.key or ""):
            recs = sorted(store.records(row.run_id, include_warmup=False), key=lambda r: r.index)
            assert len(recs) == 10
            # a level replays its own slice of the trace: request i is a line, sent at
            # that line's time (the second level's lines 10-19, not lines 0-9's times)
            lines = [(r.prompt_id or 0) % 40 for r in recs]
            assert lines == list(range(lines[0], lines[0] + 10))
            assert [r.expected_output_tokens for r in recs] == [
                trace.requests[k].output_length for k in lines
            ]
            t0 = recs[0].t_scheduled_ns or 0
            offsets = [(r.t_scheduled_ns or 0) - t0 for r in recs]
            want = [trace.offsets_ns(1.0)[k] - trace.offsets_ns(1.0)[lines[0]] for k in lines]
            speeds.append(want[9] / offsets[9])
            assert all(abs(w / speeds[-1] - o) <= 1 for w, o in zip(want, offsets, strict=True))
    assert sorted(round(x, 2) for x in speeds) == [4.0, 8.0]
    assert all(r["summary"]["verdict"] == "valid" for r in sweep["runs"])


def test_the_report_shows_each_runs_prefix_cache(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    config = tmp_path / "sweep.yaml"
    with servers(Linear(1.0, 0.0), prefix_cache_block_tokens=8) as (ua,):
        config.write_text(
            "concurrency: [1]\nrequests_per_level: 8\nwarmup_requests: 0\n"
            "output_tokens: 3\ninput_tokens: 8\nshared_prefix: 2x32\n"
            f"targets:\n  - {{name: A, url: '{ua}', engine: vllm, model: calibration}}\n"
        )
        assert main(["sweep", "--config", str(config), "--out", str(out), "--no-report"]) == 0
    assert main(["report", str(out)]) == 0
    html = (out / "report.html").read_text()
    assert "<th>prefix cache</th>" in html
    # 8 requests of 40 tokens, 2 prefixes of 32: the 6 later ones find their 32
    run = read_sweep(out)["runs"][0]["summary"]["prefix_cache"]
    assert run["cached_tokens"] == 6 * 32 and run["prompt_tokens"] == 8 * 40
    assert f"{6 * 32 / (8 * 40):.0%}" in html


def test_identity_differs_names_each_setting_a_resume_refuses() -> None:
    """One rule for the live resume (SweepRunner) and ``decide --check --out``: a new
    database differs in nothing; a value, or a key one side lacks, is a difference."""
    from crossover.sweep.config import SweepConfig

    cfg = SweepConfig.model_validate(
        {"concurrency": [1], "output_tokens": 8, "targets": [{"name": "a", "url": "http://x"}]}
    )
    ident = cfg.identity()
    assert cfg.identity_differs(None) == []
    assert cfg.identity_differs(dict(ident)) == []
    assert cfg.identity_differs({**ident, "output_tokens": 9}) == ["output_tokens"]
    assert cfg.identity_differs({**ident, "old_setting": None}) == ["old_setting"]
    # runs held along another axis (a rate YAML on a concurrency folder mixed the two)
    assert cfg.identity_differs(dict(ident), {"concurrency"}) == []
    assert cfg.identity_differs(dict(ident), {"rate", "concurrency"}) == [
        "axis (its runs are along rate)"
    ]
    assert cfg.identity_differs(None, {"rate"}) == ["axis (its runs are along rate)"]
