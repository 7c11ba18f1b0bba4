"""``crossover.files.write_atomic``: a file written whole or not at all, and the writers
that go through it (the sweep file, the client-floor cache, commbench's table, a
command's --json)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from crossover.files import write_atomic


def test_writes_a_new_file_and_its_folder(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "out.json"
    write_atomic(path, "{}\n")
    assert path.read_text() == "{}\n"
    write_atomic(path, b"[1]\n")
    assert path.read_bytes() == b"[1]\n"
    assert list(path.parent.iterdir()) == [path]


def _interrupted_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ``Path.write_bytes``/``write_text`` writes half its data, then Ctrl-C."""

    def half(self: Path, data: bytes | str, *args: object, **kwargs: object) -> int:
        raw = data.encode() if isinstance(data, str) else data
        with self.open("wb") as f:
            f.write(raw[: len(raw) // 2])
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_bytes", half)
    monkeypatch.setattr(Path, "write_text", half)


def _sweep_file(path: Path) -> None:
    from crossover.analysis.schema import SweepFile

    SweepFile.model_validate({"schema": "crossover.sweep/1", "runs": []}).write(path)


def _floor_cache(path: Path) -> None:
    from crossover.metrics.client_floor import save_results

    save_results([], path)


def _commbench(path: Path) -> None:
    from crossover.commbench.results import CommbenchResult, Point, summarize

    points = [Point.of(1024, 10.0, 2, None)]
    CommbenchResult(
        gpus=2,
        device="cpu",
        mode="graph",
        source="test",
        env={},
        points=points,
        eager_points=[],
        graph_calls=1,
        summary=summarize(points, None),
    ).write(path)


def _output(path: Path) -> None:
    from crossover.cli.common import write_output

    write_output(path, '{"new": true}\n', "--json")


@pytest.mark.parametrize(
    "write",
    [
        lambda p: write_atomic(p, '{"new": true}\n'),
        _sweep_file,
        _floor_cache,
        _commbench,
        _output,
    ],
    ids=[
        "write_atomic",
        "SweepFile.write",
        "client_floor.save_results",
        "CommbenchResult.write",
        "write_output",
    ],
)
def test_an_interrupted_write_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write: Callable[[Path], None]
) -> None:
    path = tmp_path / "out.json"
    path.write_text('{"old": true}\n')
    _interrupted_write(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        write(path)
    monkeypatch.undo()
    assert path.read_text() == '{"old": true}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no .tmp left behind


def test_a_failed_rename_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "out.json"
    path.write_text("old\n")

    def refuse(self: Path, target: Path) -> Path:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "replace", refuse)
    with pytest.raises(PermissionError):
        write_atomic(path, "new\n")
    monkeypatch.undo()
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_load_yaml_refuses_a_key_given_twice_and_keeps_merges() -> None:
    import yaml

    from crossover.files import load_yaml

    with pytest.raises(yaml.YAMLError, match="key 'x' given twice"):
        load_yaml("a:\n  x: 1\n  x: 2\n")
    # a merge (<<) is overridden on purpose; equal mappings in a list are no repeat
    merged = load_yaml("a: &x {p: 1, q: 2}\nb:\n  <<: *x\n  p: 3\n")
    assert merged["b"] == {"p": 3, "q": 2}
    assert load_yaml("- {a: 1}\n- {a: 1}\n") == [{"a": 1}, {"a": 1}]


def test_read_yaml_parses_a_file_and_words_what_it_cannot_read(tmp_path: Path) -> None:
    """The reading half of ``read_yaml`` (its parse errors: tests/cli/test_user_yaml.py):
    a file that cannot be read is one line, never an OSError's traceback."""
    from crossover.errors import UsageError
    from crossover.files import read_yaml

    path = tmp_path / "c.yaml"
    path.write_bytes(b"\xef\xbb\xbfa: [1, 2]\nb: {c: x}\n")  # a byte-order mark is UTF-8 too
    assert read_yaml(path) == {"a": [1, 2], "b": {"c": "x"}}
    path.write_text("")
    assert read_yaml(path) is None
    with pytest.raises(UsageError, match=r"/missing\.yaml: cannot read it \(No such file"):
        read_yaml(tmp_path / "missing.yaml")
    with pytest.raises(UsageError, match=r": cannot read it \(Is a directory\)$"):
        read_yaml(tmp_path)
