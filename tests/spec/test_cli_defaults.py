"""The flags' defaults are the models': ``crossover run`` and ``capacity`` read them from
the spec, so a default changed in one place is changed for every command (issue 41)."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from crossover.capacity.runner import CapacityConfig
from crossover.cli.capacity import capacity
from crossover.cli.run import run
from crossover.spec.limits import Timeouts
from crossover.spec.run import RunConfig


def _flag_default(command: Any, name: str) -> Any:
    return inspect.signature(command).parameters[name].default


@pytest.mark.parametrize(
    ("flag", "model", "field"),
    [
        ("timeout_s", Timeouts, "total_s"),
        ("first_token_timeout_s", Timeouts, "first_token_s"),
        ("gap_timeout_s", Timeouts, "gap_s"),
        ("connect_timeout_s", Timeouts, "connect_s"),
        ("max_event_bytes", RunConfig, "max_event_bytes"),
        ("allowed_failures", RunConfig, "allowed_failures"),
        ("trace_block_tokens", RunConfig, "trace_block_tokens"),
        ("trace_speed", RunConfig, "trace_speed"),
        ("engine", RunConfig, "dialect"),
    ],
)
def test_run_flags_default_to_the_model(flag: str, model: Any, field: str) -> None:
    assert _flag_default(run, flag) == model.model_fields[field].default


def test_run_input_tokens_defaults_to_the_model() -> None:
    assert _flag_default(run, "input_tokens") == str(RunConfig.model_fields["input_tokens"].default)


@pytest.mark.parametrize(
    "field", ["precision", "duration_s_per_level", "early_stop", "trace_block_tokens", "seed"]
)
def test_capacity_flags_default_to_the_model(field: str) -> None:
    assert _flag_default(capacity, field) == CapacityConfig.model_fields[field].default


def test_help_reads_the_model_description() -> None:
    from typer.testing import CliRunner

    from crossover.cli.app import app

    out = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "400"}).output
    text = " ".join(out.split())
    described = Timeouts.model_fields["gap_s"].description
    assert described is not None and described[1:] in text
