"""``scripts/h200/decide_vs_grid.py`` compares a decision with a grid from the same card:
where both databases keep the machine they ran on and their GPUs differ it stops in one
line (``--any-card`` goes on and says so); where either was measured before crossover
kept it, it says the cards are to be checked by hand."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from crossover.analysis.schema import HostFacts, HostGpu
from crossover.errors import UsageError
from crossover.records.store import Store
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    path = ROOT / "scripts" / "h200" / "decide_vs_grid.py"
    return load_script(path, "decide_vs_grid_cards", True)


def _db(path: Path, gpu: str | None) -> Path:
    with Store(path) as store:
        if gpu is not None:
            host = HostFacts(seen_at="t", gpus=[HostGpu(name=gpu)], cpu="EPYC", cpus=16)
            store.set_meta("hosts", [host.model_dump(mode="json")])
    return path


def test_cards_that_differ_stop_the_comparison(tmp_path: Path) -> None:
    same_card = _script().same_card
    h100 = _db(tmp_path / "a.db", "NVIDIA H100 80GB HBM3")
    h200 = _db(tmp_path / "b.db", "NVIDIA H200")
    with pytest.raises(UsageError) as err:
        same_card(h100, h200, any_card=False)
    assert str(err.value) == (
        "the decision on NVIDIA H100 80GB HBM3, the grid on NVIDIA H200: compare a decision "
        "with a grid from the same card (--any-card to go on)"
    )
    assert same_card(h100, h200, any_card=True).endswith("(--any-card: they differ)")
    again = _db(tmp_path / "c.db", "NVIDIA H100 80GB HBM3")
    assert same_card(h100, again, any_card=False) == (
        "cards: the decision on NVIDIA H100 80GB HBM3, the grid on NVIDIA H100 80GB HBM3"
    )


def test_a_database_without_its_machine_is_said(tmp_path: Path) -> None:
    line = _script().same_card(
        _db(tmp_path / "a.db", "NVIDIA H100 80GB HBM3"), _db(tmp_path / "b.db", None), False
    )
    assert line.startswith("cards: not recorded in the grid (measured before crossover kept")
