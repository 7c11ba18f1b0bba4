"""``crossover.words``: a count and its noun agree (``1 request``, never ``1 requests``)."""

from __future__ import annotations

import pytest

from crossover.words import plural, verb


@pytest.mark.parametrize(
    ("args", "text"),
    [
        ((1, "request"), "1 request"),
        ((0, "request"), "0 requests"),
        ((2, "request"), "2 requests"),
        ((1, "retry", "retries"), "1 retry"),
        ((3, "retry", "retries"), "3 retries"),
        ((1, "request's", "requests'"), "1 request's"),
        ((2, "request's", "requests'"), "2 requests'"),
    ],
)
def test_a_count_and_its_noun_agree(args: tuple[int, str], text: str) -> None:
    assert plural(*args) == text


def test_the_count_as_it_reads_decides() -> None:
    """A formatted count is singular when it reads 1: ``0.6`` shown as ``1``."""
    assert plural(0.6, "token", fmt=".0f") == "1 token"
    assert plural(1.0, "token", fmt=".0f") == "1 token"
    assert plural(1.4, "token", fmt=".1f") == "1.4 tokens"
    assert plural(1234, "token", fmt=",") == "1,234 tokens"


def test_a_verb_agrees_with_its_count() -> None:
    assert [verb(n, "reports", "report") for n in (0, 1, 2)] == ["report", "reports", "report"]
