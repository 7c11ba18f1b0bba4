"""What ``crossover run`` refuses, ``sweep --check`` and ``capacity`` refuse with the same
line, before anything is measured (issue 41): every level of a sweep and of a capacity
search is built by the constructor ``run`` validates (``spec.run.level_run``).

The walk goes through the command line of each, as a user meets it: one ``error:`` line
and exit 2 from run and capacity, the finding in ``sweep --check``'s report and exit 2,
never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crossover.cli.app import main

URL = "http://127.0.0.1:9"
RUN = ["run", "--url", URL, "--model", "m"]
TARGET = f"targets:\n  - name: a\n    url: {URL}\n    model: m\n"


def _trace(tmp: Path) -> Path:
    rows = [
        {"timestamp": 200 * k, "input_length": 16, "output_length": 4, "hash_ids": [k % 2]}
        for k in range(8)
    ]
    path = tmp / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


#: (name, run's flags, the sweep YAML's keys, the engine of its target, the refusal)
CASES = [
    (
        "sessions held for a duration",
        ["--concurrency", "2", "--output-tokens", "4", "--turns", "3", "--duration-s", "3"],
        "concurrency: [2]\noutput_tokens: 4\nsessions: {turns: 3}\nduration_s_per_level: 3\n",
        None,
        "sessions count requests: give a request count, not a duration",
    ),
    (
        "the triton dialect asked for chat",
        ["--concurrency", "1", "--output-tokens", "4", "--engine", "triton", "--endpoint", "chat"],
        "concurrency: [1]\noutput_tokens: 4\nendpoint: chat\n",
        "triton",
        "the triton dialect has no chat endpoint",
    ),
    (
        "a trace with a shared prefix",
        ["--trace", "{trace}", "--shared-prefix", "1x8"],
        "rates: [1]\ntrace: {trace}\nshared_prefix: 1x8\n",
        None,
        "a trace sets every request's lengths and prefix blocks",
    ),
    (
        "a prompt file with shared prefixes",
        ["--concurrency", "1", "--output-tokens", "4", "--prompts", "{trace}",
         "--shared-prefix", "1x8"],
        "concurrency: [1]\noutput_tokens: 4\nprompts_file: {trace}\nshared_prefix: 1x8\n",
        None,
        "input_lengths and shared_prefix shape synthetic prompts: not with a prompt file",
    ),
    (
        "an output beyond a million tokens",
        ["--concurrency", "1", "--output-tokens", "2000000"],
        "concurrency: [1]\noutput_tokens: 2000000\n",
        None,
        "less than or equal to 1000000",
    ),
]  # fmt: skip


def _error(code: int, capsys: pytest.CaptureFixture[str]) -> str:
    out = capsys.readouterr()
    assert code == 2, out
    assert "Traceback" not in out.err + out.out
    return out.err + out.out


@pytest.mark.parametrize(
    ("run_flags", "yaml", "engine", "needle"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_run_sweep_check_and_capacity_refuse_alike(
    run_flags: list[str],
    yaml: str,
    engine: str | None,
    needle: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    trace = str(_trace(tmp_path))
    run_err = _error(main([*RUN, *(f.replace("{trace}", trace) for f in run_flags)]), capsys)
    lines = [ln for ln in run_err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], run_err

    config = tmp_path / "s.yaml"
    target = TARGET + (f"    engine: {engine}\n" if engine else "")
    config.write_text(yaml.replace("{trace}", trace) + target)
    check = _error(main(["sweep", "--config", str(config), "--check", "--remote"]), capsys)
    assert needle in check, check
    if not lines[0].startswith("error: --"):  # no flag or key to name: the very same words
        assert lines[0].removeprefix("error: ") in check, check

    cap = _error(main(["capacity", "--config", str(config), "--slo", "ttft_ms.p99=500"]), capsys)
    assert needle in cap and len([ln for ln in cap.splitlines() if ln.strip()]) == 1, cap
    assert not (tmp_path / "out").exists()
