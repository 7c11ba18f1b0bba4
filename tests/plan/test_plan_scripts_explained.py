"""Every variable a plan's scripts define, export or unset has a comment line saying what
it is for (the multicast switches of a vLLM plan were bare ``export`` lines)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from crossover.cli.app import main

CASES = [
    ("vllm", ["--tp", "2"]),
    ("vllm", ["--quant", "fp8"]),
    ("sglang", []),
    ("llamacpp", []),
    ("llamacpp", ["--quant", "gguf-q4_k_m"]),
    ("transformers", []),
    ("trtllm", ["--quant", "fp8"]),
    ("triton", []),
]
SETS = re.compile(r"^(?:export |unset )?([A-Z][A-Z0-9_]*)(?:=|$)")


@pytest.mark.parametrize(("engine", "extra"), CASES, ids=[f"{e}{''.join(x)}" for e, x in CASES])
def test_every_variable_is_explained(
    tmp_path: Path, engine: str, extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "plan"
    assert (
        main(["plan", "--engine", engine, "--model", "llama-3.1-8b", *extra, "--out", str(out)])
        == 0
    )
    capsys.readouterr()
    scripts = sorted(out.rglob("*.sh"))
    assert scripts
    seen = 0
    for path in scripts:
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            m = SETS.match(line)
            if m is None:
                continue
            seen += 1
            name = m.group(1)
            above = lines[i - 1] if i else ""
            assert above.startswith(f"# {name}: "), (path.name, line, above)
            assert "see plan.json" not in above, (path.name, name)  # a real explanation
    assert seen


def test_plan_dir_is_explained_without_files_a_plan_may_not_write() -> None:
    """A Triton repository's serve.sh said its folder held "the YAML and model repository
    it wrote": a hosted-engine plan writes no YAML, a trtllm-serve one no repository."""
    from crossover.plan.script import explain

    line = explain("PLAN_DIR")
    assert "YAML" not in line and "model repository" not in line
