"""A resumed sweep measures a target on only with the settings its stored runs were
measured with (``SweepConfig.target_settings``, kept in each run's context as
``target_settings``): how much of each level is measured and its warm-up, the client,
what the target is, and the engine's launch settings. A change is one line, exit 2,
nothing measured, written or lost, naming each target and setting as it was and is (and
the runs holding the old value where only some do); ``--redo NAME`` measures again the
target's runs measured otherwise, and only those, so a redo cut short resumes; ``--only``
leaves the others as they were. Where the engine runs and how it is reached (host, port,
health timeout, executable, paths, the model's folder) may change, and a value the
config leaves to the server or to a default reads as what it resolves to. Runs that did
not verify, and runs stored before the settings were kept, hold none."""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from crossover.records.store import Store
from crossover.spec.load import Level
from crossover.sweep.config import SweepConfig, build_sweep_config
from crossover.sweep.driver import held_settings, held_versions

from .conftest import Linear, calib_engine_target, db_runs, one_error_line, servers, sweep_in

V1, V2 = "1.0 (calibration engine)", "2.0 (calibration engine)"
FAST, SLOW = Linear(a_ms=1.0, b_ms=0.0, ttft_ms=2.0), Linear(a_ms=2.0, b_ms=0.0, ttft_ms=3.0)


def _write(tmp_path: Path, targets: list[dict[str, Any]], **more: Any) -> Path:
    cfg = {
        "name": "settings",
        "targets": targets,
        "concurrency": [1, 2],
        "requests_per_level": 4,
        "warmup_requests": 1,
        "output_tokens": 4,
        "input_tokens": 8,
        "client_floor": "off",
        **more,
    }
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _url_targets(urls: list[str]) -> list[dict[str, Any]]:
    return [
        {"name": n, "url": u, "engine": "vllm", "model": "calibration"}
        for n, u in zip("AB", urls, strict=False)
    ]


@contextlib.contextmanager
def _swept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], **more: Any
) -> Iterator[tuple[Path, list[dict[str, Any]]]]:
    """Targets A and B (their servers up while it lasts) swept once into tmp_path/out,
    what it printed read: the folder and the targets."""
    out = tmp_path / "out"
    with servers(FAST, SLOW) as urls:
        targets = _url_targets(urls)
        assert sweep_in(_write(tmp_path, targets, **more), out) == 0, capsys.readouterr().err
        capsys.readouterr()
        yield out, targets


def _held(out: Path) -> dict[str, dict[str, Any]]:
    """Each target's settings as its kept runs hold them (one setting each here)."""
    with Store(out / "sweep.db", read_only=True) as store:
        held = held_settings(store)
    settings = {name: [s for _, s in runs] for name, runs in held.items()}
    assert all(all(s == v[0] for s in v) for v in settings.values()), held
    return {name: v[0] for name, v in settings.items()}


def _folder(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file()}


def test_a_changed_measuring_setting_is_refused_naming_each_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with _swept(tmp_path, capsys) as (out, targets):
        before = _folder(out)
        assert _held(out)["A"]["requests"] == 4
        capsys.readouterr()
        # more requests per level: the stored runs and new ones would be read as repeats
        more = _write(tmp_path, targets, requests_per_level=6, repeats=2)
        assert sweep_in(more, out) == 2
        line = one_error_line(capsys.readouterr().err)
        assert line == (
            f"error: {out} holds runs measured with other settings: A (requests 4 -> 6), "
            "B (requests 4 -> 6); use another --out, the settings they "
            "were measured with, or --redo A --redo B to measure them again"
        )
        assert _folder(out) == before  # nothing measured, written or lost
        # two settings of one target, one target's own client
        targets[1]["transport"] = "lean"
        assert sweep_in(_write(tmp_path, targets, repeats=2, warmup_requests=2), out) == 2
        line = one_error_line(capsys.readouterr().err)
        assert (
            'A (warmup_requests 1 -> 2), B (warmup_requests 1 -> 2; transport "aiohttp" -> '
            '"lean"); use another --out'
        ) in line, line
        # --redo B measures B again under the lean client: refused no more
        assert sweep_in(_write(tmp_path, targets, repeats=2), out, "--redo", "B") == 0
        assert _held(out)["B"]["transport"] == "lean"
        assert _held(out)["A"]["transport"] == "aiohttp"
        # and B is now held to lean: the old client is the change
        targets[1]["transport"] = "aiohttp"
        capsys.readouterr()
        assert sweep_in(_write(tmp_path, targets, repeats=2), out) == 2
        line = one_error_line(capsys.readouterr().err)
        assert 'B (transport "lean" -> "aiohttp"); use' in line, line


def test_a_redo_measures_again_only_what_changed_and_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--redo`` under new settings stopped after some levels (here: level 1 of A
    measured under 6 requests): its runs hold both, a resume without ``--redo`` is
    refused naming the runs that hold the other, and ``--redo A`` measures those alone."""
    with _swept(tmp_path, capsys) as (out, targets):
        with sqlite3.connect(out / "sweep.db") as db:
            db.execute(
                "UPDATE runs SET context = json_set(context, "
                "'$.target_settings.requests', 6) WHERE key LIKE 'A|c=1|%'"
            )
        capsys.readouterr()
        for per_level, was, where in ((4, 6, "c=1 r=0"), (6, 4, "c=2 r=0")):
            assert sweep_in(_write(tmp_path, targets, requests_per_level=per_level), out) == 2
            line = one_error_line(capsys.readouterr().err)
            expected = f"A (requests {was} -> {per_level} (1 of its 2 runs: {where}))"
            assert expected in line, line
        kept = {r.key: r.run_id for r in db_runs(out)}
        config = _write(tmp_path, targets, requests_per_level=6)
        assert sweep_in(config, out, "--redo", "A", "--only", "A") == 0, capsys.readouterr()
        again = [r for r in db_runs(out) if r.run_id not in kept.values()]
        assert [r.key for r in again] == ["A|c=2|r=0"]  # level 1 was measured so already
        assert [r.summary["requests"]["sent"] for r in again] == [6]  # type: ignore[index]
        assert _held(out)["A"]["requests"] == 6


def test_only_measures_its_targets_and_keeps_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with _swept(tmp_path, capsys) as (out, targets):
        # A's model name changed, but only B is measured: nothing of A mixes
        targets[0]["model"] = "another"
        config = _write(tmp_path, targets, repeats=2)
        assert sweep_in(config, out, "--only", "B") == 0, capsys.readouterr().err
        assert _held(out)["A"]["model"] == "calibration"  # as its runs were measured
        capsys.readouterr()
        assert sweep_in(config, out, "--only", "A") == 2
        line = one_error_line(capsys.readouterr().err)
        assert 'A (model "calibration" -> "another"); use' in line, line
        assert "--redo A to measure it again" in line


def test_values_read_as_they_resolve(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A model left to the server is the one it lists, an engine left out is openai's
    dialect, and how many requests measure and warm each level is what the rules give
    there: a rule written another way that gives the same counts changes nothing (a
    minimum without requests_per_concurrency, a per-stream rule that gives 4 at c=1 and
    c=2); one that gives another count at some levels is refused naming those."""
    out = tmp_path / "out"
    with servers(FAST, SLOW) as urls:
        targets = [{"name": n, "url": u} for n, u in zip("AB", urls, strict=True)]
        assert sweep_in(_write(tmp_path, targets), out) == 0, capsys.readouterr().err
        assert _held(out)["A"]["model"] == "calibration"  # the one the server lists
        for t in targets:
            t.update(model="calibration", engine="openai")
        config = _write(tmp_path, targets, repeats=2, min_requests_per_level=3)
        assert sweep_in(config, out) == 0, capsys.readouterr().err
        assert len(db_runs(out)) == 8
        per_stream = {"requests_per_level": None, "requests_per_concurrency": 2}
        config = _write(tmp_path, targets, repeats=3, min_requests_per_level=4, **per_stream)
        assert sweep_in(config, out) == 0, capsys.readouterr().err
        assert len(db_runs(out)) == 12
        # a warm-up of one wave of the level: 1 at c=1 as before, 2 at c=2
        capsys.readouterr()
        config = _write(tmp_path, targets, repeats=4, warmup_requests="level")
        assert sweep_in(config, out) == 2
        line = one_error_line(capsys.readouterr().err)
        assert "A (warmup_requests 1 -> 2 (3 of its 6 runs: c=2 r=0, c=2 r=1, c=2 r=2))" in line


def test_runs_that_did_not_verify_are_not_compared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with _swept(tmp_path, capsys) as (out, targets):
        with sqlite3.connect(out / "sweep.db") as db:  # as if B's server had failed them
            db.execute(
                "UPDATE runs SET summary = json_set(summary, '$.verdict', 'invalid') "
                "WHERE key LIKE 'B|%'"
            )
        targets[1]["transport"] = "lean"
        config = _write(tmp_path, targets)
        assert sweep_in(config, out, "--redo-invalid") == 0, capsys.readouterr().err
        assert _held(out)["B"]["transport"] == "lean"


def test_where_and_how_the_engine_is_reached_may_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    target = calib_engine_target(tmp_path, "E")
    target["launch"]["env"].update(ENGINE_MODE="fast", HF_TOKEN="hf_secret1")
    assert sweep_in(_write(tmp_path, [target]), out) == 0, capsys.readouterr().err
    n = len(db_runs(out))
    # a secret is kept nowhere in the results: the database, the engine's log
    assert b"hf_secret1" not in (out / "sweep.db").read_bytes()
    logs = list((out / "engines").glob("*.log"))
    assert logs and not any(b"hf_secret1" in p.read_bytes() for p in logs)
    assert '"HF_TOKEN":"<redacted>"' in logs[0].read_text()
    assert "HF_TOKEN" not in _held(out)["E"]["launch.env"]
    # another machine's: another health timeout, another path in the environment,
    # another token
    target["launch"]["health_timeout_s"] = 60
    target["launch"]["env"].update(HF_HOME=str(tmp_path / "hf"), HF_TOKEN="hf_secret2")
    assert sweep_in(_write(tmp_path, [target], repeats=2), out) == 0, capsys.readouterr().err
    assert len(db_runs(out)) == 2 * n
    # the engine's own settings are measured ones, its environment's values and its
    # model too (two checkpoints may share a folder's name)
    target["launch"]["parallel"] = 8
    target["launch"]["env"]["ENGINE_MODE"] = "slow"
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    model = Path(target["launch"]["model"])
    shutil.copy(model, moved / model.name)
    target["launch"]["model"] = str(moved / model.name)
    capsys.readouterr()
    before = _folder(out)
    assert sweep_in(_write(tmp_path, [target], repeats=3), out) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "E (launch.model " in line and "; launch.parallel 4 -> 8; launch.env {" in line, line
    assert len(db_runs(out)) == 2 * n and _folder(out) == before


def test_a_redo_sets_aside_runs_it_does_not_measure_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Runs outside the levels and repeats a ``--redo NAME`` under new settings measures
    (here a level and a repeat the config no longer has) would keep the old settings in
    its levels: they are set aside, kept in sweep.db, and said."""
    with _swept(tmp_path, capsys, concurrency=[1, 2, 3], repeats=2) as (out, targets):
        stored = len(db_runs(out))
        capsys.readouterr()
        narrow = _write(tmp_path, targets, requests_per_level=6)
        assert sweep_in(narrow, out, "--redo", "A", "--only", "A") == 0
        said = capsys.readouterr()
        assert (
            "A: 4 runs measured with other settings outside the levels and repeats this "
            "command measures (c=1 r=1, c=2 r=1, c=3 r=0, c=3 r=1) set aside: kept in "
            "sweep.db, no longer points of sweep.json"
        ) in " ".join((said.out + said.err).split()), said
        runs = json.loads((out / "sweep.json").read_text())["runs"]
        mine = sorted((r["concurrency"], r["repeat"]) for r in runs if r["target"] == "A")
        assert mine == [(1, 0), (2, 0)]
        assert len(db_runs(out)) == stored + 2  # nothing deleted
        assert _held(out)["A"]["requests"] == 6
        # the same command again: nothing measured otherwise is left
        assert sweep_in(narrow, out, "--only", "A") == 0, capsys.readouterr().err
        assert len(db_runs(out)) == stored + 2


def test_runs_stored_before_the_settings_were_kept_compare_with_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with _swept(tmp_path, capsys) as (out, targets):
        with sqlite3.connect(out / "sweep.db") as db:  # as the committed results were stored
            db.execute("UPDATE runs SET context = json_remove(context, '$.target_settings')")
        more = _write(tmp_path, targets, requests_per_level=6, repeats=2)
        assert sweep_in(more, out) == 0, capsys.readouterr().err
        assert _held(out)["A"]["requests"] == 6  # the new runs keep theirs
        # from now on they count
        capsys.readouterr()
        assert sweep_in(_write(tmp_path, targets, repeats=3), out) == 2
        line = one_error_line(capsys.readouterr().err)
        assert "A (requests 6 -> 4), B (requests 6 -> 4);" in line, line


def test_settings_differ_compares_only_what_both_hold() -> None:
    cfg = build_sweep_config({
        "concurrency": [1], "output_tokens": 4, "duration_s_per_level": 40,
        "targets": [{"name": "s", "launch": {"engine": "sglang", "model": "/m/qwen",
                                             "freeze_gc": True, "port": 3000}}],
    })  # fmt: skip
    (s,) = cfg.targets
    now = cfg.target_settings(s, Level("concurrency", 1))
    assert now["launch.freeze_gc"] is True and now["duration_s_per_level"] == 40
    assert now["requests"] is None  # a duration measures each level
    assert now["launch.model"] == "/m/qwen" and now["engine"] == "sglang"
    assert "launch.port" not in now and "launch.host" not in now
    was = {**now, "launch.freeze_gc": False, "duration_s_per_level": 60}
    assert cfg.settings_differ({"s": [("c=1 r=0", was)]}, {"s"}) == {
        "s": ["duration_s_per_level 60 -> 40", "launch.freeze_gc false -> true"]
    }
    # runs that differ among themselves: each old value, with where it is held
    at_2 = cfg.target_settings(s, Level("concurrency", 2))
    runs = [("c=1 r=0", was), ("c=1 r=1", {**was, "duration_s_per_level": 30}), ("c=2 r=0", at_2)]
    assert cfg.settings_differ({"s": runs}, {"s"}) == {
        "s": [
            "duration_s_per_level 60 or 30 -> 40 (2 of its 3 runs: c=1 r=0, c=1 r=1)",
            "launch.freeze_gc false -> true (2 of its 3 runs: c=1 r=0, c=1 r=1)",
        ]
    }
    assert not cfg.same_settings(s, "c=1 r=0", was) and cfg.same_settings(s, "c=1 r=0", now)
    # a setting one side lacks (added since, or gone) is not known: not compared
    older = {k: v for k, v in was.items() if k != "launch.freeze_gc"}
    assert cfg.settings_differ({"s": [("c=1 r=0", older)]}, {"s"}) == {
        "s": ["duration_s_per_level 60 -> 40"]
    }
    # only the targets asked about, and none without stored settings
    assert cfg.settings_differ({"s": [("c=1 r=0", was)]}, set()) == {}
    assert cfg.settings_differ({"s": []}, {"s"}) == {}
    assert cfg.settings_differ({}, {"s"}) == {}
    # a secret flag's value is kept as <redacted>
    keyed = build_sweep_config({
        "concurrency": [1], "output_tokens": 4,
        "targets": [{"name": "s", "launch": {"engine": "vllm", "model": "/m/q",
                                             "extra_args": ["--api-key", "sk-1", "--x"]}}],
    })  # fmt: skip
    kept = keyed.target_settings(keyed.targets[0], Level("concurrency", 1))
    assert kept["launch.extra_args"] == ["--api-key", "<redacted>", "--x"]
    # a run kept before the value was redacted compares alike, and shows no key
    stored = {**kept, "launch.extra_args": ["--api-key", "sk-1", "--x"]}
    assert keyed.settings_differ({"s": [("c=1 r=0", stored)]}, {"s"}) == {}
    other = {**kept, "launch.extra_args": ["--api-key", "sk-1", "--y"]}
    (said,) = keyed.settings_differ({"s": [("c=1 r=0", other)]}, {"s"})["s"]
    assert "sk-1" not in said and "<redacted>" in said
    long = {**now, "launch.extra_args": ["--x"] * 30}
    (said,) = cfg.settings_differ({"s": [("c=1 r=0", long)]}, {"s"})["s"]
    assert said.startswith('launch.extra_args ["--x", "--x"') and said.endswith("... -> []")


def _per_stream(k: float, floor: int = 16) -> SweepConfig:
    return build_sweep_config({
        "concurrency": [1, 4, 8], "output_tokens": 4, "requests_per_concurrency": k,
        "min_requests_per_level": floor, "targets": [{"name": "a", "url": "http://h:1"}],
    })  # fmt: skip


def test_counts_compare_as_they_resolve_at_each_level() -> None:
    """The requests a level is measured with are its count there: a rule that changes
    the count at some levels names each change with its levels; one that gives the same
    counts is no change."""
    was = _per_stream(4)  # 16 at c=1 and c=4, 32 at c=8
    (a,) = was.targets
    runs = [(f"c={c} r=0", was.target_settings(a, Level("concurrency", c))) for c in (1, 4, 8)]
    assert [r["requests"] for _, r in runs] == [16, 16, 32]
    assert _per_stream(4).settings_differ({"a": runs}, {"a"}) == {}
    # the default rule (4 per stream, at least 16) is this one written out
    default = build_sweep_config({
        "concurrency": [1, 4, 8], "output_tokens": 4, "targets": [{"name": "a", "url": "http://h:1"}],
    })  # fmt: skip
    assert default.requests_per_concurrency is None and default.requests_per_level is None
    assert default.settings_differ({"a": runs}, {"a"}) == {}
    assert _per_stream(2, 32).settings_differ({"a": runs}, {"a"}) == {
        "a": ["requests 16 -> 32 (2 of its 3 runs: c=1 r=0, c=4 r=0)"]
    }
    assert _per_stream(6).settings_differ({"a": runs}, {"a"}) == {
        "a": ["requests 16 -> 24 at c=4, 32 -> 48 at c=8"]
    }


def test_settings_kept_as_written_are_read_as_they_resolve() -> None:
    """Runs stored while the counts were kept as written (``requests_per_level``,
    ``requests_per_concurrency`` and its floor, ``warmup_requests: level``) compare by
    the counts those rules give at their levels."""
    cfg = _per_stream(4)
    (a,) = cfg.targets
    written = {
        k: v for k, v in cfg.target_settings(a, Level("concurrency", 1)).items()
        if k not in ("requests", "warmup_requests", "warmup_output_tokens")
    }  # fmt: skip
    as_written = {
        **written, "duration_s_per_level": None, "requests_per_level": None,
        "requests_per_concurrency": None, "min_requests_per_level": None,
        "warmup_requests": "level", "warmup_output_tokens": None,
    }  # fmt: skip
    runs = [(f"c={c} r=0", as_written) for c in (1, 4, 8)]
    # the default rule then, per stream with its floor now: the same counts
    assert (
        cfg.model_copy(update={"warmup_requests": "level"}).settings_differ({"a": runs}, {"a"})
        == {}
    )
    # a warm-up of 1 where a wave of the level was: 1 at c=1 (no change), 4 and 8 otherwise
    assert cfg.model_copy(update={"warmup_requests": 1}).settings_differ({"a": runs}, {"a"}) == {
        "a": ["warmup_requests 4 or 8 -> 1 (2 of its 3 runs: c=4 r=0, c=8 r=0)"]
    }
    fixed = [("c=8 r=0", {**as_written, "requests_per_level": 20, "warmup_requests": 8})]
    assert cfg.settings_differ({"a": fixed}, {"a"}) == {"a": ["requests 20 -> 32"]}


def test_an_engine_upgraded_between_sessions_measures_none_of_its_levels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The engine's version is known once it has started: a launched target whose kept
    runs were measured with another version measures nothing (its engine is stopped) and
    says so, the other targets go on, the sweep exits 3 (levels not measured) naming the
    way on; ``--redo NAME`` measures it
    again under the new version, after which the same command resumes."""
    version = tmp_path / "version"
    version.write_text("1.0")  # the calibration engine's --version: "version: 1.0 (...)"
    out = tmp_path / "out"
    target = calib_engine_target(tmp_path, "E", env={"CALIB_ENGINE_VERSION_FILE": str(version)})
    with servers(FAST) as (url,):
        targets = [target, {"name": "B", "url": url, "engine": "vllm", "model": "calibration"}]
        assert sweep_in(_write(tmp_path, targets), out) == 0, capsys.readouterr().err
        with Store(out / "sweep.db", read_only=True) as store:
            assert held_versions(store) == {"E": {V1: ["c=1 r=0", "c=2 r=0"]}}
        stored = {r.key for r in db_runs(out)}
        version.write_text("2.0")  # upgraded
        capsys.readouterr()
        more = _write(tmp_path, targets, repeats=2)
        assert sweep_in(more, out) == 3  # levels not measured
        said = capsys.readouterr()
        text = " ".join((said.out + said.err).split())
        assert (
            f"E c=1 r=1: not measured: {out} holds runs of E measured with its engine at {V1}, "
            f"and it started at {V2}: a level would mix two versions; use another --out, the "
            "version they were measured with, or --redo E to measure it again under this one"
        ) in text, text
        assert (
            "E: not run, its engine is another version than its kept runs' (said above): "
            "c=2 r=1" in text
        ), text
        assert text.endswith(
            "the same command resumes what was not measured, but for E (another engine "
            "version: --redo E); --allow-invalid to exit 0"
        ), text
        new = {r.key for r in db_runs(out)} - stored
        assert new == {"B|c=1|r=1", "B|c=2|r=1"}  # B went on; E measured nothing
        # --redo E: every level of E again, under 2.0; here on c=1 alone, so its run at
        # c=2 (1.0) is set aside, as a run of other settings would be
        narrow = _write(tmp_path, targets, repeats=2, concurrency=[1])
        assert sweep_in(narrow, out, "--redo", "E", "--only", "E") == 0
        said = capsys.readouterr()
        assert (
            "E: 1 run measured with another engine version outside the levels and repeats "
            "this command measures (c=2 r=0) set aside"
        ) in " ".join((said.out + said.err).split()), said
        with Store(out / "sweep.db", read_only=True) as store:
            assert held_versions(store)["E"] == {V2: ["c=1 r=0", "c=1 r=1"]}
        more = _write(tmp_path, targets, repeats=2)  # (one file: narrow took its place)
        assert sweep_in(more, out) == 0, capsys.readouterr().err
        with Store(out / "sweep.db", read_only=True) as store:
            kept = held_versions(store)
        assert set(kept["E"]) == {V2} and len(kept["E"][V2]) == 4


def test_a_version_refusal_names_the_runs_and_the_way_on_per_command(tmp_path: Path) -> None:
    from crossover.sweep.driver import SweepRunner

    cfg = build_sweep_config({
        "concurrency": [1, 2], "output_tokens": 4, "requests_per_level": 4,
        "targets": [{"name": "a", "url": "http://127.0.0.1:9"}],
    })  # fmt: skip
    for command, way in (
        ("sweep", "or --redo a to measure it again under this one"),
        (
            "decide",
            "or measure it again with crossover sweep --out {out} --only a --redo a "
            "and the same --config",
        ),
        ("demo", "or --fresh to start the demo over"),
    ):
        runner = SweepRunner(cfg, tmp_path / command, command=command)
        way = way.format(out=tmp_path / command)
        try:
            runner._held_versions = {"a": {"0.9": ["c=1 r=0"], "1.0": ["c=2 r=0"]}}
            assert runner._on_version("a", None) is None  # not known: not compared
            assert runner._on_version("a", "1.0") == (
                f"{tmp_path / command} holds runs of a measured with its engine at 0.9 (1 of "
                "its 2 runs: c=1 r=0), and it started at 1.0: a level would mix two "
                f"versions; use another --out, the version they were measured with, {way}"
            )
            runner._held_versions = {"a": {"1.0": ["c=1 r=0"]}}
            assert runner._on_version("a", "1.0") is None
            # a start later in the same command at another version
            assert runner._on_version("a", "1.1") == (
                "a's engine was at 1.0 earlier in this command and it started at 1.1: a level "
                f"would mix two versions; use the version it was at, {way}"
            )
            assert runner._on_version("b", "2.0") is None  # nothing kept
        finally:
            runner.close()


def test_a_redo_of_changed_settings_measures_other_version_runs_again_and_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--redo E`` where E's settings changed at c=1 and its engine was upgraded: c=2
    (settings as now, but the old version) is measured again too, so no level mixes two
    versions; a redo cut short (c=1 already at the new version) measures only the rest."""
    version = tmp_path / "version"
    version.write_text("1.0")
    out = tmp_path / "out"
    target = calib_engine_target(tmp_path, "E", env={"CALIB_ENGINE_VERSION_FILE": str(version)})
    config = _write(tmp_path, [target])
    assert sweep_in(config, out) == 0, capsys.readouterr().err
    with sqlite3.connect(out / "sweep.db") as db:  # c=1 measured with 6 requests
        db.execute(
            "UPDATE runs SET context = json_set(context, '$.target_settings.requests', 6) "
            "WHERE key LIKE 'E|c=1|%'"
        )
    version.write_text("2.0")
    before = {r.run_id for r in db_runs(out)}
    assert sweep_in(config, out, "--redo", "E") == 0, capsys.readouterr().err
    again = sorted(r.key or "" for r in db_runs(out) if r.run_id not in before)
    assert again == ["E|c=1|r=0", "E|c=2|r=0"]
    with Store(out / "sweep.db", read_only=True) as store:
        assert held_versions(store) == {"E": {V2: ["c=1 r=0", "c=2 r=0"]}}
    # cut short: c=1 redone at 3.0 already, c=2 not yet
    version.write_text("3.0")
    with sqlite3.connect(out / "sweep.db") as db:
        db.execute(
            "UPDATE runs SET context = json_set(context, '$.context.engine.version', ?) "
            "WHERE key = 'E|c=1|r=0' AND status = 'done'",
            ("3.0 (calibration engine)",),
        )
    before = {r.run_id for r in db_runs(out)}
    capsys.readouterr()
    assert sweep_in(config, out, "--redo", "E") == 0, capsys.readouterr().err
    again = sorted(r.key or "" for r in db_runs(out) if r.run_id not in before)
    assert again == ["E|c=2|r=0"]
    assert sweep_in(config, out) == 0, capsys.readouterr().err  # one version: resumes


def test_a_refused_target_is_not_started_again_by_refine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--refine after a target was refused its version neither starts it again nor spends
    its budget on the other side of a pair it is in."""
    version = tmp_path / "version"
    version.write_text("1.0")
    starts = tmp_path / "starts"
    out = tmp_path / "out"
    env = {"CALIB_ENGINE_VERSION_FILE": str(version), "CALIB_ENGINE_STARTS": str(starts)}
    # E's gap 0.5 ms + 1 ms per other stream against B's 2 ms: they cross at c = 2.5 (E
    # 25% ahead at 2, 75% behind at 4), which --refine would measure at 3
    latency = {"ttft_ms": 2.0, "itl_ms": 0.5, "itl_per_stream_ms": 1.0}
    with servers(SLOW) as (url,):
        targets = [
            calib_engine_target(tmp_path, "E", latency=latency, env=env),
            {"name": "B", "url": url, "engine": "vllm", "model": "calibration"},
        ]
        config = _write(tmp_path, targets, concurrency=[1, 2, 4])
        assert sweep_in(config, out) == 0, capsys.readouterr().err
        version.write_text("2.0")
        starts.write_text("")
        refine = _write(tmp_path, targets, concurrency=[1, 2, 4], repeats=2, refine=True)
        capsys.readouterr()
        assert sweep_in(refine, out) == 3
        said = capsys.readouterr()
    assert len(starts.read_text().split()) == 1, said  # started once, refused once
    assert " ".join(said.out.split()).count("a level would mix two versions") == 1, said.out
    # nor is B measured alone between 2 and 4, where it crosses E: E measures nothing more
    assert "refine: measuring" not in said.err, said.err
    assert sorted(r.key or "" for r in db_runs(out) if (r.key or "").startswith("B|")) == [
        f"B|c={c}|r={r}" for c in (1, 2, 4) for r in (0, 1)
    ]


def test_a_url_target_s_server_upgraded_between_sessions_is_refused_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A URL target's server answers its version (vLLM's ``GET /version``): sweep.json and
    the runs keep it, and a resume against the same URL serving another version measures
    none of its levels."""
    out = tmp_path / "out"
    with servers(FAST, version="0.26.0") as urls:
        targets = _url_targets(urls[:1])
        assert sweep_in(_write(tmp_path, targets), out) == 0, capsys.readouterr().err
    (info,) = json.loads((out / "sweep.json").read_text())["targets"]
    assert (info["name"], info["version"], info["url"]) == ("A", "0.26.0", urls[0])
    with servers(FAST, version="0.26.1") as urls:
        targets = _url_targets(urls[:1])
        capsys.readouterr()
        assert sweep_in(_write(tmp_path, targets, repeats=2), out) == 3
        text = " ".join(capsys.readouterr().out.split())
        assert (
            "holds runs of A measured with its engine at 0.26.0, and its server answers 0.26.1 "
            "now: a level would mix two versions"
        ) in text, text
    # sweep.json names the version its points were measured with, not the refused one's
    (info,) = json.loads((out / "sweep.json").read_text())["targets"]
    assert info["version"] == "0.26.0"


def test_interleaved_a_refused_target_s_levels_are_named_as_not_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    with servers(FAST, SLOW, version="0.26.0") as urls:
        targets = _url_targets(urls)
        assert sweep_in(_write(tmp_path, targets), out) == 0, capsys.readouterr().err
    with servers(FAST, SLOW, version="0.26.1") as urls:
        targets = _url_targets(urls)
        capsys.readouterr()
        assert sweep_in(_write(tmp_path, targets, repeats=2, interleave=True), out) == 3
    text = " ".join(capsys.readouterr().out.split())
    assert (
        "A: not run, its engine is another version than its kept runs' (said above): c=2 r=1"
    ) in text, text
    assert "B: not run" in text  # B's server was upgraded too


def test_a_url_target_s_replicas_are_each_asked_their_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every replica of a URL target answers its version: replicas of two versions say so
    and keep both; the same servers listed in another order read as the same version."""
    out = tmp_path / "out"
    with contextlib.ExitStack() as stack:
        a = stack.enter_context(servers(FAST, version="0.26.0"))[0]
        b = stack.enter_context(servers(FAST, version="0.26.1"))[0]
        target = {"name": "R", "engine": "vllm", "model": "calibration"}
        assert sweep_in(_write(tmp_path, [{**target, "urls": [a, b]}]), out) == 0
        said = capsys.readouterr()
        assert "warning: its replicas answer different versions" in said.err, said.err
        (info,) = json.loads((out / "sweep.json").read_text())["targets"]
        assert info["version"] == "0.26.0 + 0.26.1"
        config = _write(tmp_path, [{**target, "urls": [b, a]}], repeats=2)
        assert sweep_in(config, out) == 0, capsys.readouterr().err
    assert len(db_runs(out)) == 4


def test_check_with_out_says_the_refusal_the_run_would_give(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``sweep --check --out DIR`` reads DIR as a resume would: a changed setting is the
    same one line (exit 2) before anything is measured, the folder left as it was; the
    settings the runs were measured with, or --redo NAME, pass."""
    with _swept(tmp_path, capsys) as (out, targets):
        before = _folder(out)
        more = _write(tmp_path, targets, requests_per_level=6)
        assert sweep_in(more, out, "--check") == 2
        checked = one_error_line(capsys.readouterr().err)
        assert sweep_in(more, out) == 2
        assert one_error_line(capsys.readouterr().err) == checked
        assert "A (requests 4 -> 6), B (requests 4 -> 6)" in checked
        assert _folder(out) == before
        assert sweep_in(more, out, "--check", "--redo", "A", "--redo", "B") == 0
        assert sweep_in(_write(tmp_path, targets), out, "--check") == 0
        assert "OK, 2 target(s) checked" in capsys.readouterr().out
        assert _folder(out) == before
