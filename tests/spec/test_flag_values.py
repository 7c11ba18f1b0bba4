"""The flag values ``crossover run`` and ``crossover sweep`` turn into a config's fields
(``crossover.spec``): ``--turns``/``--think-s`` as sessions, ``--prompt-lengths`` as the
input length the config gets, ``--metrics-url`` as the engine's metrics URL; a value out
of range is one line naming its flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from crossover.errors import UsageError
from crossover.spec.run import engine_metrics_url
from crossover.spec.workload import prompt_lengths_input, sessions_of


def test_turns_and_think_time_are_sessions_from_two_turns_on() -> None:
    assert sessions_of(None, None) is None and sessions_of(1, 5.0) is None
    assert sessions_of(3, None) == {"turns": 3, "think_s": 0.0}
    assert sessions_of(2, 1.5) == {"turns": 2, "think_s": 1.5}
    with pytest.raises(UsageError, match=r"^--turns 0: at least 1$"):
        sessions_of(0, None)
    for bad in (-1.0, float("nan"), 3601.0):
        with pytest.raises(UsageError, match=r"^--think-s .*: 0 to 3600 seconds$"):
            sessions_of(2, bad)


def test_prompt_lengths_fit_or_keep_the_files_own() -> None:
    prompts = Path("prompts.jsonl")
    assert prompt_lengths_input(None, None, "128") == "128"
    assert prompt_lengths_input("fit", prompts, "128") == "128"
    assert prompt_lengths_input("dataset", prompts, "128") is None
    with pytest.raises(UsageError, match="expected fit or dataset, got 'trim'"):
        prompt_lengths_input("trim", prompts, "128")
    with pytest.raises(UsageError, match="goes with --prompts FILE"):
        prompt_lengths_input("dataset", None, "128")


def test_the_engines_metrics_url() -> None:
    url = "http://127.0.0.1:8000"
    assert engine_metrics_url("auto", url) == url + "/metrics"
    assert engine_metrics_url("off", url) is None
    assert engine_metrics_url("http://other:9090/m", url) == "http://other:9090/m"
    with pytest.raises(UsageError, match=r"^--metrics-url: expected auto, off or an http"):
        engine_metrics_url("metrics", url)
