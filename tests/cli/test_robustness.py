"""Bad input found by a robustness pass over every command: one clear line, a non-zero
exit, and nothing the user gave changed or lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossover.cli.app import main
from tests.errlines import one_line_error


@pytest.mark.parametrize("content", [b"", b"not a database at all\n"])
def test_summarize_leaves_a_file_that_is_no_database_as_it_was(
    tmp_path: Path, content: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    """An empty file was opened as a results database, given its tables, and summarized
    as holding no run (exit 0): the file read was rewritten as an SQLite database."""
    path = tmp_path / "results.db"
    path.write_bytes(content)
    assert main(["summarize", str(path)]) == 2
    assert "not a crossover results database" in one_line_error(capsys)
    assert path.read_bytes() == content


def _outputs(tmp: Path) -> dict[str, list[str]]:
    """Each command with an output-file flag, given everything else it needs (servers
    that do not answer: the flag must be refused before anything is contacted)."""
    from crossover.records.store import Store

    db = tmp / "results.db"
    Store(db).close()
    log = tmp / "engine.log"
    log.write_text("starting\n")
    prompts = tmp / "prompts.txt"
    prompts.write_text("hello\n")
    url = "http://127.0.0.1:9"
    return {
        "run": ["run", "--url", url, "--model", "m", "--output-tokens", "4",
                "--concurrency", "1", "--out", str(tmp / "o"), "--json"],
        "summarize": ["summarize", str(db), "--json"],
        "capacity": ["capacity", "--url", url, "--model", "m", "--output-tokens", "4",
                     "--slo", "ttft_ms.p99=500", "--json"],
        "calibrate": ["calibrate", "--concurrency", "1", "--output-tokens", "4", "--itl-ms", "1",
                      "--no-cache", "--json"],
        "calibrate-cache": ["calibrate", "--concurrency", "1", "--output-tokens", "4",
                            "--itl-ms", "1", "--cache"],
        "advise": ["advise", "--model", "llama-3-8b", "--gpu", "H100", "--json"],
        "advise-emit": ["advise", "--model", "llama-3-8b", "--gpu", "H100", "--emit-sweep"],
        "verify-config": ["verify-config", str(log), "--engine", "vllm", "--json"],
        "quality": ["quality", "--reference", f"r={url}", "--candidate", f"c={url}",
                    "--prompts", str(prompts), "--json"],
        "decide": ["decide", "--replay", str(db), "--json"],
    }  # fmt: skip


@pytest.mark.parametrize(
    "command",
    ["run", "summarize", "capacity", "calibrate", "calibrate-cache", "advise", "advise-emit",
     "verify-config", "quality", "decide"],
)  # fmt: skip
@pytest.mark.parametrize("where", ["a folder", "below a file"])
def test_an_output_file_that_cannot_be_written_is_refused_first(
    tmp_path: Path, command: str, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--json DIR`` (and the like) was written after the work, as a traceback: a
    run's, a calibration's or a capacity search's result lost at the end."""
    args = _outputs(tmp_path)[command]
    blocker = tmp_path / "blocker"
    if where == "a folder":
        blocker.mkdir()
        target = blocker
    else:
        blocker.write_text("x")
        target = blocker / "out.json"
    assert main([*args, str(target)]) == 2
    line = one_line_error(capsys)
    assert args[-1] in line or "output folder" in line
    assert blocker.is_dir() if where == "a folder" else blocker.read_text() == "x"


@pytest.mark.parametrize("content", ['{"a":', "[1]"])
def test_calibrate_refuses_a_bad_floor_cache_before_measuring(
    tmp_path: Path, content: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cache was read only to merge the results into it: after the measuring, which
    was then lost."""
    cache = tmp_path / "floor.json"
    cache.write_text(content)
    args = ["calibrate", "--concurrency", "1", "--output-tokens", "4", "--cache", str(cache)]
    assert main(args) == 2
    assert "not a crossover floor file" in one_line_error(capsys)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--itl-ms", "nan"], "--itl-ms"),
        (["--itl-ms", "inf"], "--itl-ms"),
        (["--requests", "0"], "--requests"),
        (["--transport", "curl"], "--transport"),
        # it ran on, opening sockets for 99999999 streams
        (["--concurrency", "1,99999999"], "--concurrency 99999999: at most 100000"),
    ],
)
def test_calibrate_bad_numbers(
    args: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["calibrate", "--concurrency", "1", "--no-cache", *args]) == 2
    assert needle in one_line_error(capsys)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--question", "lead", "--at", "0"], "--at"),
        (["--question", "lead", "--at", "1,,64"], "--at: empty item"),
        (["--start-s", "nan"], "--start-s"),
        (["--start-s", "inf"], "--start-s"),
    ],
)
def test_decide_bad_numbers(
    tmp_path: Path, args: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from crossover.records.store import Store

    db = tmp_path / "sweep.db"
    Store(db).close()
    assert main(["decide", "--replay", str(db), *args]) == 2
    assert needle in one_line_error(capsys)


def test_an_interrupted_decide_says_it_resumes() -> None:
    from crossover.cli.app import _interrupted

    assert "resume" in _interrupted(["decide", "--config", "s.yaml", "--out", "d"])


def test_an_interrupted_redo_says_what_the_same_command_measures_again() -> None:
    """A plain sweep resumes keeping its finished runs; under ``--redo NAME@4`` (an
    outlier's levels, settings unchanged) the same command measures those levels again in
    full, which the line says instead of "finished runs are kept"."""
    from crossover.cli.app import _interrupted

    plain = _interrupted(["sweep", "--config", "s.yaml", "--out", "d"])
    assert "finished runs are kept" in plain
    for redo in (["--redo", "A@4"], ["--redo=A"]):
        said = _interrupted(["sweep", "--config", "s.yaml", "--out", "d", *redo])
        assert "finished runs are kept" not in said
        assert "measures every level a --redo names again where neither changed" in said


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "--url", "http://127.0.0.1:9", "--model", "m", "--output-tokens", "4",
          "--concurrency", "1", "--duration-s", "inf"], "--duration-s: Input should be a finite"),
        (["run", "--url", "http://127.0.0.1:9", "--model", "m", "--output-tokens", "4",
          "--rate", "inf", "--duration-s", "1"], "--rate: Input should be a finite"),
        (["capacity", "--url", "http://127.0.0.1:9", "--model", "m", "--output-tokens", "4",
          "--slo", "ttft_ms.p99=50", "--duration-s-per-level", "inf"], "--duration-s-per-level"),
        (["capacity", "--url", "http://127.0.0.1:9", "--model", "m", "--output-tokens", "4",
          "--slo", "ttft_ms.p99=50", "--start-rate", "inf"], "--start-rate"),
        (["calibration-server", "--port", "0", "--itl-ms", "inf"], "itl_ms: Input should be a"),
        # nan was "Input should be less than or equal to 4"
        (["capacity", "--url", "http://127.0.0.1:9", "--model", "m", "--output-tokens", "4",
          "--slo", "ttft_ms.p99=50", "--precision", "nan"], "--precision: Input should be a finite"),
    ],
)  # fmt: skip
def test_infinite_numbers_are_refused(
    args: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An infinite duration or rate was an OverflowError (a traceback) when the level
    began; an infinite delay a calibration server that silently never answered."""
    assert main(args) == 2
    assert needle in one_line_error(capsys)


def test_an_infinite_sweep_duration_is_refused(tmp_path: Path) -> None:
    from crossover.errors import UsageError
    from crossover.sweep.config import build_sweep_config

    data = {
        "targets": [{"name": "a", "url": "http://h", "model": "m"}],
        "concurrency": [1],
        "output_tokens": 4,
        "duration_s_per_level": float("inf"),
    }
    with pytest.raises(UsageError, match="duration-s-per-level: Input should be a finite"):
        build_sweep_config(data)


def test_an_argument_that_is_not_utf8_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model name with a byte that is not UTF-8 (a surrogate in Python's argv) reached
    the results database: a traceback once the run's context was stored."""
    model = b"m\xff".decode("utf-8", "surrogateescape")
    args = ["run", "--url", "http://127.0.0.1:9", "--model", model, "--output-tokens", "4",
            "--concurrency", "1", "--out", str(tmp_path / "o")]  # fmt: skip
    assert main(args) == 2
    assert "not UTF-8" in one_line_error(capsys)
    assert not (tmp_path / "o").exists()


def test_a_calibration_config_that_is_not_utf8_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(b"itl_ms: \xff\n")
    assert main(["calibration-server", "--port", "0", "--config", str(path)]) == 2
    assert "not UTF-8 text" in one_line_error(capsys)


def test_a_key_given_twice_in_a_users_yaml_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """PyYAML keeps the last value of a key given twice: advise ran with one of two
    profiles, and nothing said which (the calibration server's config: tests/calibration)."""
    path = tmp_path / "c.yaml"
    path.write_text("itl_ms: 5\nitl_ms: 50\n")
    args = ["advise", "--gpu", "H100", "--model", "llama-3.1-8b", "--calibration", str(path)]
    assert main(args) == 2
    assert "key 'itl_ms' given twice" in one_line_error(capsys)


def _sweep_db(path: Path, targets: tuple[str, ...] = ("A", "B")) -> None:
    """A database with one finished sweep level of two requests per target."""
    from crossover.records.model import RequestRecord
    from crossover.records.store import Store

    context = {
        "mode": "concurrency",
        "concurrency": 1,
        "output_tokens": 1,
        "endpoint": "completions",
        "engine": {"name": "openai", "url": "http://127.0.0.1:9", "model": "m"},
        "started_at": "2026-01-01T00:00:00Z",
    }
    with Store(path) as store:
        for name in targets:
            run = f"run-{name}"
            store.create_run(run, {"context": context}, key=f"{name}|c=1|r=0")
            recs = [
                RequestRecord(index=i, expected_output_tokens=1, t_send_ns=i + 1) for i in (0, 1)
            ]
            store.add_records(run, recs)
            store.finish_run(run, "done", {"verdict": "valid"})


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE requests SET record = x'7b6e6f74' WHERE idx = 1",
        'UPDATE requests SET record = \'{"index": "x"}\' WHERE idx = 1',
        "UPDATE runs SET context = '{bad'",
        "UPDATE runs SET summary = '[1, 2]'",
        'UPDATE runs SET context = \'{"context": {"mode": 5}}\'',
    ],
)
@pytest.mark.parametrize("command", ["summarize", "decide"])
def test_a_damaged_row_of_a_database_is_one_line(
    tmp_path: Path, damage: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A row SQLite reads but crossover cannot (JSON broken by hand or a bad disk) was
    a JSONDecodeError, ValidationError or AttributeError traceback."""
    import sqlite3

    db = tmp_path / "sweep.db"
    _sweep_db(db)
    with sqlite3.connect(db) as conn:
        conn.execute(damage)
    conn.close()
    args = ["summarize", str(db)] if command == "summarize" else ["decide", "--replay", str(db)]
    rc = main(args)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if rc != 0:  # a summary is not read back by summarize (it summarizes the records anew)
        assert rc == 2
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert lines[-1].startswith("error:") and "damaged" in lines[-1], err


def test_a_replay_of_one_target_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A database (or --target) with one target was a ValueError traceback."""
    db = tmp_path / "sweep.db"
    _sweep_db(db, ("A",))
    assert main(["decide", "--replay", str(db)]) == 2
    assert "compares targets" in one_line_error(capsys)


def test_a_replay_asked_about_a_level_the_sweep_did_not_measure_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It answered "levels none" and exited 0, where a live decide refuses the level."""
    db = tmp_path / "sweep.db"
    _sweep_db(db)
    assert main(["decide", "--replay", str(db), "--question", "lead", "--at", "1,64"]) == 2
    assert one_line_error(capsys) == "error: --at 64: not a level of the sweep (1)"


def test_a_folder_given_for_an_input_file_is_named_a_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder was said not to exist ("sweep config DIR does not exist")."""
    from crossover.errors import UsageError
    from crossover.workload import read_texts

    assert main(["sweep", "--config", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "is a folder, not a file" in one_line_error(capsys)
    with pytest.raises(UsageError, match="is a folder, not a file"):
        read_texts(tmp_path)


@pytest.mark.parametrize(
    "args",
    [
        ["verify-config", "{dir}", "--engine", "llamacpp"],
        ["models", "convert", "{dir}", "--out", "{dir}/hf"],
        ["models", "requantize", "{dir}", "--type", "Q8_0", "--out", "{dir}/q.gguf"],
        ["run", "--url", "http://127.0.0.1:9", "--model", "m", "--output-tokens", "4",
         "--concurrency", "1", "--client-floor", "{dir}"],
    ],
)  # fmt: skip
def test_more_folders_given_for_input_files_are_named_folders(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """They were "log file not found" and "no such file", though the path was there."""
    assert main([a.replace("{dir}", str(tmp_path)) for a in args]) == 2
    assert "a folder, not a file" in one_line_error(capsys)


RUN9 = ["run", "--url", "http://127.0.0.1:9", "--model", "m", "--output-tokens", "4"]
CAP9 = ["capacity", "--url", "http://127.0.0.1:9", "--model", "m", "--output-tokens", "4",
        "--slo", "ttft_ms.p99=50"]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ([*RUN9, "--rate", "1e-300", "--requests", "2"], "--rate: a rate must be"),
        ([*RUN9, "--rate", "1e300", "--duration-s", "1"], "--rate: a rate must be"),
        ([*CAP9, "--max-rate", "1e300"], "--max-rate: a rate must be"),
        ([*CAP9, "--start-rate", "1e-9"], "--start-rate: a rate must be"),
        (["sweep", "--target", "A=http://127.0.0.1:9", "--model", "m", "--output-tokens", "4",
          "--rates", "1e300", "--out", "OUT"], "--rates: a rate must be"),
        ([*RUN9, "--concurrency", "1", "--connect-timeout-s", "inf"], "--connect-timeout-s"),
    ],
)  # fmt: skip
def test_rates_and_limits_out_of_any_range_are_refused(
    tmp_path: Path, args: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--rate 1e300 built a schedule of 1e300 entries (a hang); --rate 1e-300 put a send
    past a float's range and --connect-timeout-s inf reached aiohttp (OverflowErrors)."""
    args = [str(tmp_path / "o") if a == "OUT" else a for a in args]
    assert main(args) == 2
    assert needle in one_line_error(capsys)


def test_models_convert_and_requantize_refuse_an_out_of_the_wrong_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """convert --out FILE was a NotADirectoryError traceback; requantize --out DIR ran
    llama-quantize, which failed on it after loading the model: pages of its log."""
    src = tmp_path / "m.gguf"
    src.write_bytes(b"GGUF")
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert main(["models", "convert", str(src), "--out", str(a_file)]) == 2
    assert "a file is there" in one_line_error(capsys)
    args = ["models", "requantize", str(src), "--type", "Q8_0", "--out", str(tmp_path)]
    assert main(args) == 2
    assert "that is a folder" in one_line_error(capsys)
    assert a_file.read_text() == "x"


def test_a_sweep_whose_results_file_is_a_folder_is_refused_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """sweep.json is written after each level: a folder there was an IsADirectoryError
    traceback once the first level was measured."""
    from crossover.calibration.config import CalibrationConfig
    from crossover.calibration.server import spawn

    out = tmp_path / "o"
    (out / "sweep.json").mkdir(parents=True)
    with spawn(CalibrationConfig()) as url:
        args = ["sweep", "--target", f"A={url}", "--model", "calibration", "--concurrency", "1",
                "--output-tokens", "4", "--requests-per-level", "2", "--out", str(out)]  # fmt: skip
        assert main(args) == 2
    assert "sweep.json is a folder" in one_line_error(capsys)


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"num_attention_heads": 0}, "'num_attention_heads' must be a positive integer"),
        ({"num_key_value_heads": 0}, "'num_key_value_heads' must be a positive integer"),
        ({"num_hidden_layers": 0}, "'num_hidden_layers' must be a positive integer"),
        ({"hidden_size": "big"}, "'hidden_size' must be an integer, got 'big'"),
    ],
)
@pytest.mark.parametrize("command", ["advise", "plan"])
def test_a_model_config_of_impossible_shape_is_one_line(
    tmp_path: Path,
    change: dict[str, object],
    needle: str,
    command: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A zero among a config's shapes was a ZeroDivisionError traceback; a key there
    but no integer was said to be missing."""
    import json

    config = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
              "num_attention_heads": 32, "num_key_value_heads": 8,
              "intermediate_size": 14336, "vocab_size": 128256, **change}  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    if command == "advise":
        args = ["advise", "--gpu", "H100", "--model", str(path)]
    else:
        args = ["plan", "--engine", "vllm", "--model", str(path), "--out", str(tmp_path / "p")]
    assert main(args) == 2
    assert needle in one_line_error(capsys)


@pytest.mark.parametrize("command", ["run", "sweep"])
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--turns", "0"], "--turns 0: at least 1"),
        (["--turns", "-3"], "--turns -3: at least 1"),
        (["--think-s", "-1"], "--think-s -1: 0 to 3600"),
        (["--think-s", "nan"], "--think-s nan: 0 to 3600"),
        (["--turns", "2", "--think-s", "inf"], "--think-s inf: 0 to 3600"),
    ],
)
def test_bad_session_flags(
    tmp_path: Path,
    command: str,
    args: list[str],
    needle: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--turns 0 (or -3) and --think-s -1 (or nan) ran as one-turn loads, said nothing."""
    if command == "run":
        base = [*RUN9, "--concurrency", "1"]
    else:
        base = ["sweep", "--target", "A=http://127.0.0.1:9", "--model", "m", "--output-tokens",
                "4", "--concurrency", "1", "--out", str(tmp_path / "o")]  # fmt: skip
    assert main([*base, *args]) == 2
    assert needle in one_line_error(capsys)


def test_an_output_over_the_commands_own_input_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``summarize sweep.db --json sweep.db`` wrote its JSON over the database: every
    raw record lost. ``decide --replay DB --json DB`` the same."""
    db = tmp_path / "sweep.db"
    _sweep_db(db)
    before = db.read_bytes()
    for args in (["summarize", str(db), "--json", str(db)],
                 ["decide", "--replay", str(db), "--json", str(db)]):  # fmt: skip
        assert main(args) == 2
        assert "this command's own sweep.db" in one_line_error(capsys)
    assert db.read_bytes() == before


def test_advise_json_over_its_model_config_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    config = tmp_path / "config.json"
    text = json.dumps({"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2,
                       "num_attention_heads": 4, "intermediate_size": 512, "vocab_size": 1000})  # fmt: skip
    config.write_text(text)
    args = ["advise", "--gpu", "H100", "--model", str(config), "--json", str(config)]
    assert main(args) == 2
    assert "this command's own config.json" in one_line_error(capsys)
    assert config.read_text() == text
