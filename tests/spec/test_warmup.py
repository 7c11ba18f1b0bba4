"""The warm-up part (``crossover.spec.load.Warmup``): ``warmup_requests`` as a number or
``level`` (one wave of the level's own concurrency), in a sweep YAML and on the flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossover.cli.app import main
from crossover.errors import UsageError
from crossover.spec.load import Warmup
from crossover.sweep.config import load_sweep_config

TARGET = "targets:\n  - {name: a, url: 'http://127.0.0.1:9', engine: vllm, model: m}\n"


def _yaml(tmp_path: Path, warmup: str) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(
        f"concurrency: [1, 16, 64]\noutput_tokens: 4\nwarmup_requests: {warmup}\n{TARGET}"
    )
    return path


def test_level_is_accepted_in_a_sweep_yaml(tmp_path: Path) -> None:
    cfg = load_sweep_config(_yaml(tmp_path, "level"))
    assert cfg.warmup_requests == "level"


@pytest.mark.parametrize("c", [1, 2, 9, 16, 64, 256])
def test_level_warms_up_with_the_levels_own_concurrency(c: int) -> None:
    from crossover import defaults

    w = Warmup(warmup_requests="level")
    assert w.warmup_for(c, "level") == c  # not min(c, 8)
    assert w.warmup_for(c, "run") == c  # not min(c, 16)
    # all of them in flight at once: one wave
    assert defaults.warmup_concurrency(c, w.warmup_for(c, "level")) == c


def test_level_without_a_concurrency_is_the_default_rule() -> None:
    """An open loop (a rate level) and capacity have no concurrency to fill: the rule as
    today."""
    w = Warmup(warmup_requests="level")
    assert w.warmup_for(None, "level") == Warmup().warmup_for(None, "level")
    assert w.warmup_for(None, "run") == Warmup().warmup_for(None, "run")
    assert w.warmup_for(None, "capacity") == Warmup().warmup_for(None, "capacity")


def test_a_number_is_unchanged(tmp_path: Path) -> None:
    cfg = load_sweep_config(_yaml(tmp_path, "3"))
    assert cfg.warmup_requests == 3
    assert [cfg.warmup_for(c, "level") for c in (1, 16, None)] == [3, 3, 3]
    assert load_sweep_config(_yaml(tmp_path, "0")).warmup_for(64, "level") == 0


@pytest.mark.parametrize("bad", ["wave", "-1", "1.5", "true", "Level", "[1]", "{n: 1}"])
def test_anything_else_is_refused_in_one_line(tmp_path: Path, bad: str) -> None:
    with pytest.raises(UsageError) as err:
        load_sweep_config(_yaml(tmp_path, bad))
    msg = str(err.value)
    assert "\n" not in msg
    assert "warmup_requests: Input should be a whole number >= 0 or level, got" in msg
    assert msg.count(";") == 0  # one problem, not one per member of the union


def _command(command: str, tmp_path: Path) -> list[str]:
    """``run`` or ``sweep`` of one unreachable URL (a flag is refused before any request)."""
    if command == "run":
        return ["run", "--url", "http://127.0.0.1:9", "--model", "m"]
    out = str(tmp_path / "o")
    return ["sweep", "--out", out, "--target", "a=http://127.0.0.1:9", "--model", "m"]


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_the_flag_refuses_another_word_naming_itself(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _command(command, tmp_path)
    assert main([*base, "--output-tokens", "4", "--concurrency", "4", "--warmup", "wave"]) == 2
    err = capsys.readouterr().err
    assert "--warmup: Input should be a whole number >= 0 or level, got 'wave'" in err
    assert "Traceback" not in err and "warmup_requests" not in err


def test_a_level_warm_up_with_warm_ups_off_after_the_first_level_is_refused(
    tmp_path: Path,
) -> None:
    """``level`` means every level's own wave; ``warmup_every_level: false`` would warm
    the first level only, silently: the two together are refused in one line."""
    cfg = tmp_path / "s.yaml"
    cfg.write_text(
        "concurrency: [1, 4]\noutput_tokens: 8\nwarmup_requests: level\nwarmup_every_level: false\n"
        "targets:\n  - {name: a, url: 'http://127.0.0.1:9', engine: vllm, model: m}\n"
    )
    with pytest.raises(UsageError) as e:
        load_sweep_config(cfg)
    assert "warmup_every_level" in str(e.value) and "\n" not in str(e.value)


# --- warmup_output_tokens: what each warm-up request asks for --------------------------


def _yaml_out(tmp_path: Path, out: str) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(
        "concurrency: [1, 16]\noutput_tokens: 256\nwarmup_requests: level\n"
        f"warmup_output_tokens: {out}\n{TARGET}"
    )
    return path


def test_warmup_output_tokens_is_read_and_reaches_each_levels_run(tmp_path: Path) -> None:
    from crossover.spec.load import Level

    cfg = load_sweep_config(_yaml_out(tmp_path, "8"))
    assert cfg.warmup_output_tokens == 8
    run = cfg.level_run(Level("concurrency", 16), ["http://127.0.0.1:9"], "openai", "m")
    assert (run.warmup_output_tokens, run.output_tokens, run.warmup) == (8, 256, 16)


def test_warmup_output_tokens_null_is_the_measured_length(tmp_path: Path) -> None:
    from crossover.spec.load import Level

    cfg = load_sweep_config(_yaml_out(tmp_path, "null"))
    assert cfg.warmup_output_tokens is None
    run = cfg.level_run(Level("concurrency", 1), ["http://127.0.0.1:9"], "openai", "m")
    assert run.warmup_output_tokens is None


@pytest.mark.parametrize("bad", ["0", "-4", "true", "1.5", "many"])
def test_warmup_output_tokens_below_one_or_not_a_number_is_refused(
    tmp_path: Path, bad: str
) -> None:
    with pytest.raises(UsageError) as err:
        load_sweep_config(_yaml_out(tmp_path, bad))
    msg = str(err.value)
    assert "\n" not in msg and msg.count(";") == 0
    assert "warmup_output_tokens: Input should be" in msg


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_the_warmup_output_flag_refuses_zero_naming_itself(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _command(command, tmp_path)
    args = [*base, "--output-tokens", "4", "--concurrency", "4", "--warmup-output-tokens", "0"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--warmup-output-tokens: Input should be greater than or equal to 1" in err
    assert "Traceback" not in err
