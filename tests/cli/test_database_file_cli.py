"""A results database under an output folder that is some other file (``sweep --out``'s
sweep.db, ``capacity --out``'s capacity.db, ``decide --out``'s sweep.db) is refused in one
line, exit 2, before any server is asked or engine started, and left as it was, as
``run --db`` is: it was found only once every target had been checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossover.cli.app import main
from tests.errlines import one_line_error

GARBAGE = b"\x00\xffnot a database\x13\x37" * 8


def _yaml(tmp_path: Path, url: str) -> Path:
    """Two targets at ``url``, two levels."""
    path = tmp_path / "sweep.yaml"
    path.write_text(
        "targets:\n"
        + "".join(f"  - {{name: {n}, url: '{url}', model: m}}\n" for n in ("A", "B"))
        + "concurrency: [1, 2]\ninput_tokens: 8\noutput_tokens: 4\nrequests_per_level: 2\n"
    )
    return path


def _garbage(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(GARBAGE)
    return path


def _refused(
    rc: int, db: Path, out: Path, left: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 2 with one line naming ``db``, the file as it was, and ``out`` holding only
    ``left`` (no engine logs, no other results)."""
    assert rc == 2
    assert f"{db}: not a crossover results database" in one_line_error(capsys)
    assert db.read_bytes() == GARBAGE
    assert sorted(p.name for p in out.iterdir()) == left


def test_sweep_refuses_a_sweep_db_that_is_not_sqlite_before_any_request(
    counting_server: tuple[str, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, hits = counting_server
    out = tmp_path / "res"
    db = _garbage(out / "sweep.db")
    rc = main(["sweep", "--config", str(_yaml(tmp_path, url)), "--out", str(out)])
    assert hits == []
    _refused(rc, db, out, ["sweep.db"], capsys)


def test_sweep_refuses_it_before_an_engine_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    from tests.sweep.conftest import calib_engine_target

    config = tmp_path / "sweep.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "targets": [calib_engine_target(tmp_path, n) for n in ("A", "B")],
                "concurrency": [1],
                "input_tokens": 8,
                "output_tokens": 4,
                "requests_per_level": 2,
            }
        )
    )
    out = tmp_path / "res"
    db = _garbage(out / "sweep.db")
    rc = main(["sweep", "--config", str(config), "--out", str(out)])
    _refused(rc, db, out, ["sweep.db"], capsys)  # no engines/ logs


def test_capacity_refuses_a_capacity_db_that_is_not_sqlite_before_any_request(
    counting_server: tuple[str, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, hits = counting_server
    out = tmp_path / "res"
    db = _garbage(out / "capacity.db")
    rc = main(["capacity", "--url", url, "--model", "m", "--output-tokens", "4",
               "--slo", "ttft_ms.p99=100", "--out", str(out)])  # fmt: skip
    assert hits == []
    _refused(rc, db, out, ["capacity.db"], capsys)


def test_capacity_config_checks_every_target_s_database_before_the_first_search(
    counting_server: tuple[str, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--config``: each target searches into OUT/NAME/capacity.db; the second target's
    is refused before the first target's server is asked."""
    url, hits = counting_server
    out = tmp_path / "res"
    db = _garbage(out / "B" / "capacity.db")
    rc = main(["capacity", "--config", str(_yaml(tmp_path, url)), "--slo", "ttft_ms.p99=100",
               "--out", str(out)])  # fmt: skip
    assert hits == []
    _refused(rc, db, out, ["B"], capsys)


def test_decide_refuses_a_sweep_db_that_is_not_sqlite_before_any_request(
    counting_server: tuple[str, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, hits = counting_server
    out = tmp_path / "res"
    db = _garbage(out / "sweep.db")
    rc = main(["decide", "--config", str(_yaml(tmp_path, url)), "--out", str(out)])
    assert hits == []
    _refused(rc, db, out, ["sweep.db"], capsys)


@pytest.mark.parametrize("what", ["garbage", "empty", "folder"])
def test_decide_replay_of_what_is_not_a_results_database_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], what: str
) -> None:
    """``--replay`` opens its database read-only: some other file, or a folder holding no
    database, is one line and stays as it was (it did before the checks above; kept so)."""
    db = tmp_path / "sweep.db"
    if what == "folder":
        db.mkdir()
    else:
        db.write_bytes(GARBAGE if what == "garbage" else b"")
    assert main(["decide", "--replay", str(db)]) == 2
    line = one_line_error(capsys)
    assert str(db) in line
    # a folder is read as a results folder (sweep.db or sweep.db.xz): this one has neither
    why = "no sweep.db or sweep.db.xz" if what == "folder" else "not a crossover results database"
    assert why in line
    if what != "folder":
        assert db.read_bytes() == (GARBAGE if what == "garbage" else b"")
    assert [p.name for p in tmp_path.iterdir()] == ["sweep.db"]
