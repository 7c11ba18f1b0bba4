"""``crossover sweep``'s flags as a ``SweepConfig`` (``crossover.sweep.flags``): the
``--target`` list, or a YAML with the flags over its keys; a mistake names its flag."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crossover.errors import UsageError
from crossover.sweep.config import SweepConfig
from crossover.sweep.flags import sweep_config_of

TARGET = ["a=http://127.0.0.1:9,model=m"]


def _of(flags: dict[str, Any] | None = None, **kw: Any) -> SweepConfig:
    given: dict[str, Any] = {
        "config": None, "target": TARGET, "engine": None, "model": None, "concurrency": "1,4",
        "rates": None, "turns": None, "think_s": None, "refine": False, "prompt_lengths": None,
    }  # fmt: skip
    given.update(kw)
    return sweep_config_of({"output_tokens": "8", "seed": None, **(flags or {})}, **given)


def test_targets_levels_and_sessions_from_the_flags() -> None:
    cfg = _of(turns=3, think_s=0.5, refine=True)
    assert [t.name for t in cfg.targets] == ["a"] and cfg.concurrency == [1, 4]
    assert cfg.sessions is not None and cfg.sessions.turns == 3 and cfg.refine
    assert _of(concurrency=None, rates="2,4.5").rates == [2.0, 4.5]
    assert _of(turns=1).sessions is None  # one turn is no session, as run


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({"rates": "2"}, "--concurrency or --rates, not both"),
        ({"concurrency": "1,,2"}, "--concurrency"),
        ({"target": None}, "at least one --target"),
        ({"concurrency": None}, "--concurrency (e.g. 1,2,4,8) or --rates"),
        ({"config": Path("sweep.yaml")}, "--config or --target, not both"),
    ],
)
def test_a_mistake_names_its_flag(kw: dict[str, Any], says: str) -> None:
    with pytest.raises(UsageError) as err:
        _of(**kw)
    assert says in str(err.value)


def test_output_tokens_are_required_without_a_yaml() -> None:
    with pytest.raises(UsageError, match="--output-tokens is required"):
        sweep_config_of(
            {}, config=None, target=TARGET, engine=None, model=None, concurrency="1",
            rates=None, turns=None, think_s=None, refine=False, prompt_lengths=None,
        )  # fmt: skip


def test_the_flags_go_over_a_yaml(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(
        "concurrency: [1, 2]\noutput_tokens: 4\n"
        "targets:\n  - {name: a, url: 'http://127.0.0.1:9', model: m}\n",
        encoding="utf-8",
    )
    cfg = _of({"output_tokens": "16"}, config=path, target=None, concurrency="8")
    assert cfg.concurrency == [8] and cfg.output_tokens == 16
