"""``crossover sweep`` takes run's workload flags (--endpoint, --shared-prefix, --turns,
--trace, --prompts) without a YAML, and --prompt-lengths dataset keeps a prompt file's
own lengths: every target still gets the very same prompts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crossover.cli.app import main
from crossover.records.store import Store

from ..sweep.conftest import Linear, servers, target_flags

BASE = ["--concurrency", "1", "--requests-per-level", "4", "--warmup", "0",
        "--output-tokens", "4", "--no-report"]  # fmt: skip


def _summaries(out: Path) -> list[dict[str, object]]:
    runs = json.loads((out / "sweep.json").read_text())["runs"]
    return [r["summary"] for r in runs]


def test_sweep_takes_runs_workload_flags(tmp_path: Path) -> None:
    with servers(Linear(1.0, 0.0)) as (url,):
        flags = [*target_flags({"A": url}), *BASE, "--input-tokens", "8"]
        prefix = ["--endpoint", "chat", "--shared-prefix", "2x16"]
        assert main(["sweep", *flags, *prefix, "--out", str(tmp_path / "p")]) == 0
        assert main(["sweep", *flags, "--turns", "2", "--out", str(tmp_path / "t")]) == 0
    for s in _summaries(tmp_path / "p"):
        w = s["workload"]
        assert w["endpoint"] == "chat"  # type: ignore[index]
        assert w["shape"]["shared_prefix"] == "2x16"  # type: ignore[index]
    for s in _summaries(tmp_path / "t"):
        assert [t["turn"] for t in s["turns"]] == [1, 2]  # type: ignore[index]


def test_prompt_lengths_dataset_keeps_each_prompt_as_written(tmp_path: Path) -> None:
    texts = ["a b c", "one two three four five six seven eight nine ten eleven twelve"]
    data = [{"conversations": [{"from": "human", "value": t}, {"from": "gpt", "value": "ok"}]}
            for t in texts]  # fmt: skip
    file = tmp_path / "sharegpt.json"
    file.write_text(json.dumps(data))
    out = tmp_path / "sweep"
    with servers(Linear(1.0, 0.0), Linear(1.5, 0.0)) as (ua, ub):
        rc = main(["sweep", *target_flags({"A": ua, "B": ub}), *BASE, "--prompts", str(file),
                   "--prompt-lengths", "dataset", "--out", str(out)])  # fmt: skip
    assert rc == 0
    with Store(out / "sweep.db") as store:
        sent = {p["text"] for p in store.get_meta("prompts")}
        assert sent == set(texts)  # neither padded nor trimmed
        per_target: dict[str, set[int]] = {}
        for row in store.runs():
            assert row.key is not None
            ids = {r.prompt_id for r in store.records(row.run_id)}
            per_target[row.key.split("|")[0]] = {i for i in ids if i is not None}
    assert per_target["A"] == per_target["B"]
    for s in _summaries(out):
        assert s["workload"]["input_tokens"] is None  # type: ignore[index]


def test_prompt_lengths_needs_a_prompt_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(["sweep", "--target", "a=http://127.0.0.1:9,model=m", *BASE,
               "--prompt-lengths", "dataset", "--out", str(tmp_path / "o")])  # fmt: skip
    assert rc == 2
    assert "--prompt-lengths dataset goes with --prompts" in capsys.readouterr().err
    rc = main(["sweep", "--target", "a=http://127.0.0.1:9,model=m", *BASE,
               "--prompt-lengths", "all", "--out", str(tmp_path / "o")])  # fmt: skip
    assert rc == 2
    assert "expected fit or dataset" in capsys.readouterr().err


def test_output_lengths_from_the_datasets_replies(tmp_path: Path) -> None:
    """``--output-tokens dataset:MAX``: each request asks for its conversation's reply
    length (the calibration server counts words), capped, and every target gets the same."""
    convs = [("a b c", "one two three four"), ("d e", "x " * 30), ("f", "yes")]
    data = [{"conversations": [{"from": "human", "value": p}, {"from": "gpt", "value": r}]}
            for p, r in convs]  # fmt: skip
    file = tmp_path / "sharegpt.json"
    file.write_text(json.dumps(data))
    out = tmp_path / "sweep"
    base = BASE[:-3] + BASE[-1:]  # without its --output-tokens 4
    assert "--output-tokens" not in base
    with servers(Linear(1.0, 0.0), Linear(1.5, 0.0)) as (ua, ub):
        rc = main(["sweep", *target_flags({"A": ua, "B": ub}), *base, "--prompts", str(file),
                   "--prompt-lengths", "dataset", "--output-tokens", "dataset:16",
                   "--out", str(out)])  # fmt: skip
    assert rc == 0
    want = {"a b c": 4, "d e": 16, "f": 1}
    with Store(out / "sweep.db") as store:
        by_id = {p["id"]: p for p in store.get_meta("prompts")}
        asked: dict[str, list[tuple[int, int]]] = {}
        for row in store.runs():
            assert row.key is not None
            for r in store.records(row.run_id):
                assert r.prompt_id is not None
                p = by_id[r.prompt_id]
                assert r.expected_output_tokens == want[p["text"]] == r.completion_tokens
                asked.setdefault(row.key.split("|")[0], []).append(
                    (r.prompt_id, r.expected_output_tokens)
                )
    assert sorted(asked["A"]) == sorted(asked["B"])
    for s in _summaries(out):
        assert s["verdict"] == "valid"
        assert s["workload"]["shape"] == {"output_lengths": "dataset:16"}  # type: ignore[index]
