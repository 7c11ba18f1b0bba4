"""The reading commands take a results folder as it is committed, its database as
``sweep.db.xz``: one command reproduces a committed figure, where a reader unpacked the
database by hand first (``report`` tied no GC pause to a run, ``--resummarize`` refused).
The folder is left as it was and the decompressed copy is gone afterwards; a damaged
``.xz`` is one line, exit 2.

Real data: docs/results/h100/sglang-freeze (SGLang with and without freeze_gc, 12 runs,
its engine logs: 4 runs of ``sglang`` met a long collection, none of ``sglang-freeze``)
and docs/results/h100/moe-open (an open-loop grid the replay reaches 3 of 3 on)."""

from __future__ import annotations

import json
import lzma
import shutil
from pathlib import Path

import pytest

from crossover.cli.app import main
from tests.errlines import one_line_error

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results" / "h100"
FREEZE = RESULTS / "sglang-freeze"
OPEN = RESULTS / "moe-open" / "sweep.db.xz"
METRICS = ["--metric", "total_tokens_per_s", "--metric", "ttft_ms.p50", "--metric", "ttft_ms.p99"]


def _committed(tmp_path: Path) -> Path:
    """A copy of the committed sglang-freeze folder as committed: no sweep.db."""
    folder = tmp_path / "sglang-freeze"
    folder.mkdir(parents=True)
    for name in ("sweep.json", "sweep.db.xz"):
        shutil.copyfile(FREEZE / name, folder / name)
    shutil.copytree(FREEZE / "engines", folder / "engines")
    return folder


def _state(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _unpacked(packed: Path, dest: Path) -> Path:
    with lzma.open(packed) as src, dest.open("wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)
    return dest


def _gc_lines(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if ln.startswith("GC pause: ")]


@pytest.mark.slow
@pytest.mark.parametrize("flags", [[], ["--resummarize"]])
def test_report_on_a_committed_folder_ties_its_gc_pauses(
    tmp_path: Path, temp_root: Path, capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    folder = _committed(tmp_path)
    before = _state(folder)
    out = tmp_path / "out" / "freeze.html"
    assert main(["report", str(folder), "--out", str(out), *flags]) == 0
    printed = capsys.readouterr().out
    lines = _gc_lines(printed)
    assert len(lines) == 4, printed
    assert all(ln.startswith("GC pause: sglang c=") for ln in lines)
    if flags:
        assert printed.startswith("resummarized 12 runs from sweep.db's records")
    assert "garbage collection" in out.read_text()
    assert _state(folder) == before
    assert list(temp_root.iterdir()) == []


@pytest.mark.slow
def test_the_report_reads_the_xz_as_it_reads_the_unpacked_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    packed = _committed(tmp_path / "packed")
    plain = _committed(tmp_path / "plain")
    _unpacked(plain / "sweep.db.xz", plain / "sweep.db")
    (plain / "sweep.db.xz").unlink()
    printed = {}
    for folder in (packed, plain):
        assert main(["report", str(folder), "--out", str(folder.parent / "r.html")]) == 0
        printed[folder] = capsys.readouterr().out.replace(str(folder.parent), "HERE")
    assert printed[packed] == printed[plain]


@pytest.mark.slow
def test_replaying_the_xz_decides_as_replaying_the_unpacked_database(
    tmp_path: Path, temp_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = _unpacked(OPEN, tmp_path / "sweep.db")
    got = {}
    for db in (OPEN, plain):
        out = tmp_path / f"{db.parent.name}.json"
        assert main(["decide", "--replay", str(db), *METRICS, "--json", str(out)]) == 0
        printed = capsys.readouterr().out
        assert f"against the grid ({db}): 3 of 3 conclusions the same" in printed
        data = json.loads(out.read_text())
        assert data["replay"].pop("database") == str(db)
        got[db] = data
    # the committed .xz lies in its sweep folder (sweep.json, engines/): the runs it read
    # that a pause met are named, all SGLang's; the copy elsewhere is a database alone
    seen = {key: got[OPEN].pop(key) for key in ("kv_full", "queued", "machines", "gc_pauses")}
    assert seen["machines"] == {}  # one machine measured the whole grid
    assert seen["gc_pauses"]
    # SGLang's second repeat at 20 requests/s kept up to 18 requests waiting
    assert [(x["target"], x["level"], x["repeat"]) for x in seen["queued"]] == [("sglang", 20, 1)]
    assert "queued" not in got[plain]
    assert {x["target"] for x in seen["gc_pauses"]} == {"sglang"}
    assert "gc_pauses" not in got[plain]
    # and its note on a moved TTFT names the pauses that met that level, with the remedy;
    # otherwise the two replays decide alike
    noted, bare = got[OPEN].pop("notes"), got[plain].pop("notes")
    moved = [n for n in noted if n.startswith("TTFT p99: the repeats")]
    assert len(moved) == 1 and "GC pause" in moved[0] and "freeze_gc: true" in moved[0]
    assert [n for n in noted if n not in moved] == [n for n in bare if "TTFT p99" not in n]
    assert not any("GC pause" in n for n in bare)
    assert got[OPEN] == got[plain]
    assert list(temp_root.iterdir()) == []


@pytest.mark.slow
def test_replaying_a_results_folder_reads_its_xz(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["decide", "--replay", str(OPEN.parent), *METRICS]) == 0
    assert "3 of 3 conclusions the same" in capsys.readouterr().out


def test_summarize_reads_the_xz_as_the_unpacked_database(
    tmp_path: Path, temp_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _committed(tmp_path / "packed")
    packed = folder / "sweep.db.xz"
    plain = _unpacked(packed, tmp_path / "sweep.db")
    got = {}
    for db in (packed, plain):
        assert main(["summarize", str(db), "--json", str(tmp_path / f"{db.name}.json")]) == 0
        got[db] = (capsys.readouterr().out, (tmp_path / f"{db.name}.json").read_bytes())
    assert got[packed] == got[plain]
    assert len(json.loads(got[packed][1])) == 12
    assert list(temp_root.iterdir()) == []


def _damaged(folder: Path, what: str) -> Path:
    packed = folder / "sweep.db.xz"
    data = packed.read_bytes()
    if what == "cut":
        packed.write_bytes(data[: len(data) // 2])
    elif what == "garbage":
        packed.write_bytes(b"\0" * 4096)
    else:  # a whole .xz that holds no database
        packed.write_bytes(lzma.compress(b"a sweep.json, not a database\n"))
    return packed


COMMANDS = {
    "summarize": lambda d: ["summarize", str(d / "sweep.db.xz")],
    "decide": lambda d: ["decide", "--replay", str(d / "sweep.db.xz")],
    "decide folder": lambda d: ["decide", "--replay", str(d)],
    "report": lambda d: ["report", str(d), "--out", str(d.parent / "r.html")],
    "report --resummarize": lambda d: [
        "report", str(d), "--out", str(d.parent / "r.html"), "--resummarize"
    ],
}  # fmt: skip


@pytest.mark.parametrize("what", ["cut", "garbage", "not sqlite"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_damaged_xz_is_one_line(
    tmp_path: Path, temp_root: Path, capsys: pytest.CaptureFixture[str], command: str, what: str
) -> None:
    folder = _committed(tmp_path)
    packed = _damaged(folder, what)
    before = _state(folder)
    assert main(COMMANDS[command](folder)) == 2
    line = one_line_error(capsys)
    why = "not a crossover results database" if what == "not sqlite" else "cannot decompress"
    assert line.startswith(f"error: {packed}: {why}"), line
    assert _state(folder) == before
    assert not (tmp_path / "r.html").exists()
    assert list(temp_root.iterdir()) == []


def test_a_replay_of_a_sweep_folder_names_its_kv_full_and_gc_pause_runs(
    tmp_path: Path, temp_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A replay of a sweep folder's own database names, as a live decision does after its
    answer, the recorded runs it read whose KV cache was full and those a logged pause
    met (the folder's sweep.json and engines/ beside it); a database alone names none."""
    folder = _committed(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    args = ["decide", "--replay", str(folder), "--metric", "ttft_ms.p50"]
    assert main([*args, "--json", str(out / "d.json")]) == 0
    lines = capsys.readouterr().out.splitlines()
    kv = [x for x in lines if x.startswith("KV full (in the grid's runs this replay read): ")]
    gc = [x for x in lines if x.startswith("GC pause (in the grid's runs this replay read): ")]
    assert [x.split(": ")[1].split(" at ")[0] for x in kv] == ["sglang", "sglang-freeze"]
    assert len(gc) == 4
    assert all(": sglang c=" in x for x in gc)  # none of the frozen engine's
    # the note on TTFT's moved repeats names the pauses that met them, as a live one does
    (note,) = [x for x in lines if x.startswith("note: TTFT p50: the repeats")]
    assert "(sglang at 256; GC pauses in SGLang's front end met repeat 0 (0.51 s)" in note
    assert "freeze_gc: true under sglang's launch (the" in note
    data = json.loads((out / "d.json").read_text())
    assert len(data["kv_full"]) == 6  # three repeats at 256 of each
    assert sorted((x["target"], x["repeat"]) for x in data["gc_pauses"] if x["level"] == 256) == [
        ("sglang", 0),
        ("sglang", 1),
        ("sglang", 2),
    ]
    # the question at 64 alone reads no run at 256: only the pause at 64 is said
    assert main([*args, "--question", "lead", "--at", "64"]) == 0
    at64 = capsys.readouterr().out
    assert "KV full" not in at64
    assert at64.count("GC pause (in the grid's runs this replay read): sglang c=64") == 1
    # a database alone (another name, no sweep folder around it): neither
    alone = _unpacked(folder / "sweep.db.xz", out / "grid.db")
    assert main(["decide", "--replay", str(alone), "--json", str(out / "a.json")]) == 0
    said = capsys.readouterr().out
    assert "KV full" not in said and "GC pause" not in said
    assert "kv_full" not in json.loads((out / "a.json").read_text())
    assert list(temp_root.iterdir()) == []


OPEN_FREEZE = RESULTS / "sglang-freeze-open"


def test_the_open_loop_freeze_folder_reads_as_its_readme_says(
    tmp_path: Path, temp_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/results/h100/sglang-freeze-open: a pause met every default run at 12
    requests/s and none of the frozen engine's; every frozen TTFT p99 there lies under
    every default one; the replay's note on TTFT p99 names those pauses and the remedy."""
    runs = json.loads((OPEN_FREEZE / "sweep.json").read_text())["runs"]
    p99 = {
        (r["target"], r["repeat"]): r["summary"]["ttft_ms"]["p99"] for r in runs if r["rate"] == 12
    }
    frozen = [v for (t, _), v in p99.items() if t == "sglang-freeze"]
    default = [v for (t, _), v in p99.items() if t == "sglang"]
    assert len(frozen) == len(default) == 3
    assert max(frozen) < min(default)
    args = ["decide", "--replay", str(OPEN_FREEZE), "--metric", "ttft_ms.p99"]
    assert main([*args, "--json", str(tmp_path / "d.json")]) == 0
    lines = capsys.readouterr().out.splitlines()
    (note,) = [x for x in lines if x.startswith("note: TTFT p99: the repeats")]
    assert "(sglang at 12; GC pauses in SGLang's front end met repeat 0" in note
    assert "freeze_gc: true under sglang's launch (the" in note
    paused = json.loads((tmp_path / "d.json").read_text())["gc_pauses"]
    assert sorted((x["level"], x["repeat"]) for x in paused if x["target"] == "sglang") == [
        (8, 1),
        (12, 0),
        (12, 1),
        (12, 2),
    ]
    assert {x["target"] for x in paused} == {"sglang"}
    assert list(temp_root.iterdir()) == []
