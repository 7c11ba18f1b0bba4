"""Each setting is declared in one class: run, sweep and capacity are built from the
``crossover.spec`` parts, so a key cannot drift between them (issue 41).

A declaration is an annotated name in a class body (a pydantic field, a dataclass
field); an inherited field is not declared again. The walk is over the source, as
``tests/test_layering.py`` walks the imports."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "crossover"

#: the settings issue 41 counted in 21 classes
ONCE = (
    "input_lengths",
    "output_lengths",
    "trace_block_tokens",
    "prompts_file",
    "warmup_requests",
    "timeouts",
    "connect_s",
    "first_token_s",
)


def declarations(root: Path = SRC) -> dict[str, list[str]]:
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    found[stmt.target.id].append(f"{path.relative_to(root)}:{node.name}")
    return found


def test_each_setting_is_declared_in_one_class() -> None:
    found = declarations()
    many = {k: found[k] for k in ONCE if len(found[k]) != 1}
    assert many == {}
    assert sum(len(found[k]) for k in ONCE) == len(ONCE)


def test_the_walk_sees_a_second_declaration(tmp_path: Path) -> None:
    """The walk counts what it is meant to: a key declared again in a subclass, or in a
    dataclass of another file, is one more."""
    (tmp_path / "a.py").write_text(
        "class A:\n    seed: int = 0\n\nclass B(A):\n    seed: int = 1\n"
    )
    (tmp_path / "b.py").write_text(
        "import dataclasses\n@dataclasses.dataclass\nclass C:\n    seed: int\n"
    )
    assert declarations(tmp_path)["seed"] == ["a.py:A", "a.py:B", "b.py:C"]


def test_run_sweep_and_capacity_share_the_parts() -> None:
    from crossover.capacity.runner import CapacityConfig
    from crossover.spec.limits import Limits
    from crossover.spec.load import Warmup
    from crossover.spec.run import RunConfig
    from crossover.spec.workload import Workload
    from crossover.sweep.config import SweepConfig

    for model in (RunConfig, SweepConfig, CapacityConfig):
        assert issubclass(model, Workload)
        assert issubclass(model, Warmup)
        assert issubclass(model, Limits)


def test_a_bound_holds_wherever_the_key_is_given() -> None:
    """The drift the issue found: ``output_tokens: 2000000`` was refused by run only."""
    import pytest
    from pydantic import ValidationError

    from crossover.capacity.runner import CapacityConfig
    from crossover.sweep.config import SweepConfig

    with pytest.raises(ValidationError, match="less than or equal to 1000000"):
        SweepConfig.model_validate(
            {
                "targets": [{"name": "a", "url": "http://h:1"}],
                "concurrency": [1],
                "output_tokens": 2_000_000,
            }
        )
    with pytest.raises(ValidationError, match="less than or equal to 1000000"):
        CapacityConfig(url="http://h:1", model="m", output_tokens=2_000_000, slo=["x"])
