"""docs/sweep-yaml.md is generated from the config models and must be current."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from crossover.sweep.config import SweepConfig, load_sweep_config
from crossover.sweep.reference import SECTIONS, main, render, rows

DOC = Path(__file__).resolve().parents[2] / "docs" / "sweep-yaml.md"


def test_committed_reference_is_current() -> None:
    assert DOC.read_text(encoding="utf-8") == render(), (
        "docs/sweep-yaml.md is stale: run python -m crossover.sweep.reference --write"
    )


@pytest.mark.parametrize(("heading", "models"), [(s[0], s[2]) for s in SECTIONS])
def test_every_key_is_listed_and_explained(heading: str, models: Any) -> None:
    text = render()
    body = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    for model in models if isinstance(models, tuple) else (models,):
        for name in rows_of(model):
            assert f"| `{name}` |" in body, (heading, name)
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no description"


def rows_of(model: type[BaseModel]) -> list[str]:
    return re.findall(r"^\| `([a-z_]+)` \|", "\n".join(rows(model)), re.M)


def test_every_top_level_key_is_in_a_top_level_section() -> None:
    """The sweep's own keys and those of the parts it is built from, each once."""
    text = render()
    top = "".join(p for p in text.split("\n## ") if p.startswith("Top level"))
    for name in SweepConfig.model_fields:
        assert top.count(f"| `{name}` |") == 1, name


def test_the_example_in_the_reference_is_a_valid_sweep(tmp_path: Path) -> None:
    example = re.search(r"```yaml\n(.*?)```", render(), re.S)
    assert example is not None
    path = tmp_path / "s.yaml"
    path.write_text(example.group(1))
    cfg = load_sweep_config(path)
    assert [t.name for t in cfg.targets] == ["one-slot", "vllm", "vllm-dp2"]
    assert cfg.targets[2].base_urls == ["http://127.0.0.1:8001", "http://127.0.0.1:8002"]


def test_prints_without_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    assert capsys.readouterr().out == render()
    assert main(["--bogus"]) == 2
