"""One line for every pydantic error, naming the closest valid key or value."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from crossover.errors import (
    EngineError,
    UsageError,
    check_port,
    closest,
    parse_list,
    parse_names,
    unknown_choice,
    validation_line,
)


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    connect_s: float = 1.0


class Outer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[Inner] = []
    inner: Inner | None = None
    count: int = 0


def _error(data: dict[str, object]) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        Outer.model_validate(data)
    return info.value


def test_closest_and_unknown_choice() -> None:
    assert closest("vlm", ["vllm", "sglang"]) == "vllm"
    assert closest("zzz", ["vllm", "sglang"]) is None
    assert unknown_choice("engine", "sglng", ["vllm", "sglang"]) == (
        "unknown engine 'sglng'; did you mean 'sglang'? (known: sglang, vllm)"
    )
    assert "did you mean" not in unknown_choice("engine", "zzz", ["vllm"])


def test_unknown_keys_are_named_with_the_closest_valid_one_at_any_depth() -> None:
    exc = _error({"cuont": 1, "items": [{}, {"conect_s": 2}], "inner": {"connect": 3}})
    line = validation_line(exc, "f.yaml", model=Outer)
    assert "\n" not in line
    assert line.startswith("f.yaml: ")
    assert "cuont: unknown key; did you mean 'count'?" in line
    assert "items.1.conect_s: unknown key; did you mean 'connect_s'?" in line
    assert "inner.connect: unknown key; did you mean 'connect_s'?" in line


def test_without_a_model_an_unknown_key_is_still_one_clear_line() -> None:
    line = validation_line(_error({"cuont": 1}))
    assert line == "cuont: unknown key"


def test_prefix_flags_and_limit() -> None:
    exc = _error({"count": "x", "cuont": 1})  # field errors first, then unknown keys
    assert validation_line(exc, loc_prefix="t.launch", limit=1).startswith("t.launch.count: ")
    assert validation_line(exc, limit=1).endswith("; and 1 more")
    assert validation_line(exc, flags=True, limit=1).startswith("--count: ")


def test_engine_error_cause_is_the_last_line_the_engine_logged() -> None:
    tail = (
        'Traceback (most recent call last):\n  File "serve.py", line 117\n'
        "ImportError: Missing dependencies for serving. Install with "
        "`pip install transformers[serving]`\n\n"
    )
    err = EngineError("transformers serve exited with status 1 before becoming healthy", tail)
    assert err.cause is not None and err.cause.startswith("ImportError: Missing dependencies")
    assert EngineError("x").cause is None
    assert EngineError("x", "\n  \n").cause is None
    long = EngineError("x", "e" * 500).cause
    assert long is not None and len(long) == 200 and long.endswith("…")


@pytest.mark.parametrize(("port", "free"), [(1, False), (65535, False), (0, True), (8000, True)])
def test_check_port_takes_a_tcp_port(port: int, free: bool) -> None:
    check_port(port, free=free)


@pytest.mark.parametrize(
    ("port", "free", "line"),
    [
        (0, False, "--port 0: not a TCP port; give 1 to 65535"),
        (-1, False, "--port -1: not a TCP port; give 1 to 65535"),
        (65536, False, "--port 65536: not a TCP port; give 1 to 65535"),
        (-1, True, "--port -1: not a TCP port; give 0 to 65535 (0 picks a free one)"),
        (70000, True, "--port 70000: not a TCP port; give 0 to 65535 (0 picks a free one)"),
    ],
)
def test_check_port_refuses_one_outside(port: int, free: bool, line: str) -> None:
    with pytest.raises(UsageError) as exc:
        check_port(port, free=free)
    assert str(exc.value) == line


def test_parse_list_with_zero_takes_a_count_that_may_be_none() -> None:
    """The shared comma-list parser (``crossover.cli.common.parse_list`` is it; its own
    cases are in tests/cli/test_common.py): with ``zero`` a 0 is an item, not refused."""
    assert parse_list("48,24,0", "--n-cpu-moe", zero=True) == [48, 24, 0]
    for text, line in [
        ("-1", "--n-cpu-moe: each item must be 0 or above, got -1 in '-1'"),
        ("48,,0", "--n-cpu-moe: empty item in '48,,0'; give integers separated by commas"),
    ]:
        with pytest.raises(UsageError) as exc:
            parse_list(text, "--n-cpu-moe", zero=True)
        assert str(exc.value) == line
    with pytest.raises(UsageError, match="got nan"):
        parse_list("nan", "--x", float, zero=True)
    with pytest.raises(UsageError, match="must be above 0, got 0 in '0'"):
        parse_list("0", "--concurrency")


def test_parse_names_reads_names_and_refuses_an_empty_item() -> None:
    """The shared comma list of names: each stripped, a name given twice kept once; an
    empty item is one line, not dropped (``vllm,,sglang`` is not ``vllm,sglang``)."""
    assert parse_names(" vllm, sglang ,vllm", "--only") == ["vllm", "sglang"]
    assert parse_names("GGUF,HF", "--format", lower=True) == ["gguf", "hf"]
    assert parse_names("tp=2", "--expect") == ["tp=2"]
    for text, line in [
        ("vllm,,sglang", "--only: empty item in 'vllm,,sglang'; give names separated by commas"),
        ("vllm,", "--only: empty item in 'vllm,'; give names separated by commas"),
        (" ,vllm", "--only: empty item in ' ,vllm'; give names separated by commas"),
        (",", "--only: empty list"),
        ("", "--only: empty list"),
    ]:
        with pytest.raises(UsageError) as exc:
            parse_names(text, "--only")
        assert str(exc.value) == line
