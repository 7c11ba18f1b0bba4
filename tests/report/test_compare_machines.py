"""``crossover compare`` of two sweeps measured on two machines of one kind (their hosts'
``machine_id`` known and different) notes that machine-to-machine variation is in every
ratio and that ``--tie-margin`` allows for it; on the same machine, or where a side does
not say which machine, nothing new is said."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossover.cli.app import main
from crossover.metrics.host import HostFacts, HostGpu
from crossover.report.compare import compare_paths, compare_sweeps

from .test_compare_tie_margin import AFTER, BEFORE

H100 = HostGpu(name="NVIDIA H100 80GB HBM3", memory_gib=79.6)


def _host(machine_id: str | None, gpu: HostGpu = H100) -> HostFacts:
    return HostFacts(
        seen_at="t", gpus=[gpu], driver="580", cpu="EPYC", cpus=16, machine_id=machine_id
    )


def _folders(tmp_path: Path, a: HostFacts, b: HostFacts) -> tuple[Path, Path]:
    """Two sweep folders (sweep.json as a sweep writes it), each side's host edited."""
    out = []
    for name, sweep, host in (("a", BEFORE, a), ("b", AFTER, b)):
        d = tmp_path / name
        d.mkdir()
        sweep.model_copy(update={"hosts": [host]}).write(d / "sweep.json")
        out.append(d)
    return out[0], out[1]


def _machine_notes(notes: list[str]) -> list[str]:
    return [n for n in notes if n.startswith(("two machines of one kind", "machines differ"))]


def test_two_machines_of_one_kind_are_noted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = _folders(tmp_path, _host("gpu:aaaaaaaaaaaa"), _host("gpu:bbbbbbbbbbbb"))
    (note,) = _machine_notes(compare_paths(a, b).notes)
    assert note == (
        f"two machines of one kind: {a} on machine gpu:aaaaaaaaaaaa, {b} on machine "
        "gpu:bbbbbbbbbbbb: machine-to-machine variation is in every ratio (on two H100 "
        "80GB HBM3 machines it reached 4.4% in throughput and ITL p50, "
        "docs/results/h100/reproducibility.md); --tie-margin allows for it"
    )
    (note,) = _machine_notes(compare_paths(a, b, tie_rel=0.05).notes)
    assert note.endswith("; the tie margin of 5% allows for it")
    assert main(["compare", str(a), str(b)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "two machines of one kind:" in out and "--tie-margin allows for it" in out


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (_host("gpu:aaaaaaaaaaaa"), _host("gpu:aaaaaaaaaaaa")),  # the same machine
        (_host(None), _host("gpu:bbbbbbbbbbbb")),  # one side does not say
        (_host("gpu:aaaaaaaaaaaa"), _host(None)),
    ],
)
def test_the_same_machine_or_one_unknown_says_nothing_new(
    tmp_path: Path, a: HostFacts, b: HostFacts
) -> None:
    pa, pb = _folders(tmp_path, a, b)
    unsaid = compare_sweeps(BEFORE, AFTER, str(pa), str(pb)).notes  # no host on either
    assert compare_paths(pa, pb).notes == unsaid


def test_machines_of_different_kinds_keep_their_note(tmp_path: Path) -> None:
    h200 = _host("gpu:bbbbbbbbbbbb", HostGpu(name="NVIDIA H200", memory_gib=139.8))
    a, b = _folders(tmp_path, _host("gpu:aaaaaaaaaaaa"), h200)
    (note,) = _machine_notes(compare_paths(a, b).notes)
    assert note.startswith(f"machines differ: {a} on 1x NVIDIA H100 80GB HBM3")
