"""``crossover.cli.common``: the helpers the command modules share."""

from __future__ import annotations

import pytest

from crossover.cli.common import parse_list
from crossover.errors import UsageError


@pytest.mark.parametrize(
    ("text", "cast", "want"),
    [
        ("1,2,4", int, [1, 2, 4]),
        (" 1, 2 ,4 ", int, [1, 2, 4]),
        ("8,1,8,2", int, [8, 1, 2]),  # a level given twice is kept once, in its first place
        ("0.5,2", float, [0.5, 2.0]),
    ],
)
def test_parse_list_reads_levels(
    text: str, cast: type[int] | type[float], want: list[float]
) -> None:
    assert parse_list(text, "--concurrency", cast) == want


@pytest.mark.parametrize(
    ("text", "cast", "needle"),
    [
        ("1,,2", int, "--concurrency: empty item in '1,,2'"),
        ("1,", int, "empty item"),
        (",1", int, "empty item"),
        ("", int, "--concurrency: empty list"),
        (" , ", int, "empty list"),
        ("1,two", int, "comma-separated list of integers"),
        ("1.5", int, "comma-separated list of integers"),
        ("0,2", int, "each item must be above 0, got 0 in '0,2'"),
        ("4,-1", int, "got -1"),
        ("0", float, "got 0"),
        ("2,nan", float, "got nan"),
        ("inf", float, "got inf"),
    ],
)
def test_parse_list_refuses_what_is_not_a_level(
    text: str, cast: type[int] | type[float], needle: str
) -> None:
    with pytest.raises(UsageError) as exc:
        parse_list(text, "--concurrency", cast)
    assert str(exc.value).startswith("--concurrency: ")
    assert needle in str(exc.value)
