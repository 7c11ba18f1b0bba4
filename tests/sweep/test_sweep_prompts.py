"""Every target gets the same prompts at a level and repeat; no level or repeat reuses
another's prompts (a prefix cache would make it look faster than it is)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from crossover.cli.app import main
from crossover.records.store import Store

from .conftest import Linear, servers, target_flags


def test_prompts_matched_across_targets_and_distinct_across_runs(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    with servers(Linear(1.0, 0.1), Linear(2.0, 0.0)) as (ua, ub):
        args = ["sweep", *target_flags({"A": ua, "B": ub}), "--concurrency", "1,2",
                "--requests-per-level", "3", "--repeats", "2", "--warmup", "1",
                "--output-tokens", "4", "--input-tokens", "8", "--out", str(out),
                "--no-report", "--allow-invalid"]  # fmt: skip
        assert main(args) == 0
        # a resumed sweep adds nothing and changes no prompt
        assert main(args) == 0
    ids: dict[tuple[str, str], set[int]] = defaultdict(set)
    with Store(out / "sweep.db") as store:
        for row in store.runs():
            assert row.key is not None
            name, c, r = row.key.split("|")
            for rec in store.records(row.run_id):
                assert rec.prompt_id is not None
                ids[(name, f"{c}|{r}")].add(rec.prompt_id)
    runs = sorted({k for _, k in ids})
    assert len(runs) == 4
    for run in runs:
        assert ids[("A", run)] == ids[("B", run)], run
        assert len(ids[("A", run)]) == 3 + 1  # measured + warm-up
    for i, x in enumerate(runs):
        for y in runs[i + 1 :]:
            assert not ids[("A", x)] & ids[("A", y)], (x, y)
