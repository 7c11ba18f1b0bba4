"""The counting after a level, made faster (bench/level_overhead.py), gives the figures it
gave: the tokens per chunk and the held-back allowance against their former per-element
loops, on random records and on the shapes real streams have."""

from __future__ import annotations

import random

import pytest

from crossover.metrics.requests import NS_PER_MS, deliveries, itl_ms, tokens_per_chunk
from crossover.metrics.witness import held_back
from crossover.records.model import RequestRecord


def old_tokens_per_chunk(r: RequestRecord) -> list[int] | None:
    """``tokens_per_chunk`` as it was (a Python loop per token taken: quadratic)."""
    n_chunks = len(r.chunk_arrival_ns)
    if r.chunk_tokens is not None and len(r.chunk_tokens) == n_chunks:
        return list(r.chunk_tokens)
    total = r.completion_tokens
    if total is None or n_chunks == 0:
        return None
    if total == n_chunks:
        return [1] * n_chunks
    if total < n_chunks:
        return None
    chars = r.chunk_chars
    char_total = sum(chars)
    if char_total <= 0:
        shares = [total / n_chunks] * n_chunks
    else:
        shares = [total * c / char_total for c in chars]
    alloc = [max(1, int(s)) for s in shares]
    while sum(alloc) > total:
        alloc[max(range(n_chunks), key=lambda i: alloc[i])] -= 1
    left = total - sum(alloc)
    order = sorted(range(n_chunks), key=lambda i: shares[i] - alloc[i], reverse=True)
    for i in order[:left]:
        alloc[i] += 1
    return alloc


def old_continuation(text: str) -> int:
    return sum(len(ch.encode("utf-8")) - 1 for ch in text if ch > "\x7f")


ALPHABET = "abc xyz\n.,é中😀\u00a0"


def record(chars: list[int], total: int, text: str | None = None) -> RequestRecord:
    n = len(chars)
    return RequestRecord(
        index=0,
        expected_output_tokens=total,
        t_send_ns=0,
        t_first_ns=1,
        t_last_ns=n,
        t_done_ns=n + 1,
        chunk_arrival_ns=list(range(1, n + 1)),
        chunk_chars=chars,
        completion_tokens=total,
        count_source="usage",
        status=200,
        text=text if text is not None else "x" * sum(chars),
    )


def test_tokens_per_chunk_as_before_on_random_records() -> None:
    rng = random.Random(7)
    for _ in range(5000):
        n = rng.randint(1, 60)
        widest = rng.choice([1, 3, 8, 40])
        chars = [rng.choice([0, *range(1, widest + 1)]) for _ in range(n)]
        total = n + rng.choice([0, 1, 2, rng.randint(0, 4 * n)])
        r = record(chars, total)
        assert tokens_per_chunk(r) == old_tokens_per_chunk(r), (chars, total)


@pytest.mark.parametrize("held", [1, 2, 5, 30])
def test_tokens_per_chunk_as_before_on_stream_shapes(held: int) -> None:
    """vLLM's 256 tokens in 254 chunks (a character's first bytes held back) and SGLang's
    several tokens a chunk: the floor overshoots and most chunks give one back."""
    rng = random.Random(held)
    for _ in range(50):
        chars = [rng.choice([3, 4, 5, 6, 7, 9, 12]) for _ in range(256 - held)]
        r = record(chars, 256)
        assert tokens_per_chunk(r) == old_tokens_per_chunk(r)
    r = record([rng.randint(8, 60) for _ in range(256 // (held + 1))], 256)
    assert tokens_per_chunk(r) == old_tokens_per_chunk(r)


def test_held_back_counts_continuation_bytes_as_before() -> None:
    rng = random.Random(3)
    for _ in range(2000):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 80)))
        chars = [rng.choice([0, 1, 2]) for _ in range(rng.randint(1, 40))]
        r = record(chars, len(chars) + rng.randint(-5, 40), text)
        extra = r.completion_tokens - sum(1 for c in chars if c)  # type: ignore[operator]
        assert held_back(r) == (min(extra, old_continuation(text)) if extra > 0 else 0)


def old_itl_ms(r: RequestRecord) -> list[float]:
    """``itl_ms`` as it was: a Python loop over the deliveries."""
    if not r.ok or tokens_per_chunk(r) is None:
        return []
    groups = deliveries(r)
    out: list[float] = []
    for i in range(1, len(groups)):
        k = groups[i][1]
        if k <= 0:
            continue
        per = (groups[i][0] - groups[i - 1][0]) / k / NS_PER_MS
        out.extend([per] * k)
    return out


def test_itl_as_before_on_random_deliveries() -> None:
    """Gaps at the delivery edge (100 us), tokens per chunk said or spread, zeros, failed
    requests, and text lengths not one per chunk: the same floats in the same order."""
    rng = random.Random(5)
    for _ in range(5000):
        n = rng.randint(0, 40)
        t, arrivals = rng.randint(0, 10**12), []
        for _ in range(n):
            t += rng.choice([0, 1, 99_999, 100_000, 100_001, rng.randint(0, 10**8)])
            arrivals.append(t)
        said = [rng.randint(0, 4) for _ in range(n)] if rng.random() < 0.3 else None
        chars = [rng.randint(0, 9) for _ in range(n + rng.choice([0, 0, 0, 1, 2]))]
        r = RequestRecord(
            index=0,
            expected_output_tokens=1,
            t_send_ns=0,
            chunk_arrival_ns=arrivals,
            chunk_chars=chars,
            chunk_tokens=said,
            completion_tokens=rng.choice([None, n, n + rng.randint(0, 3 * n + 1)]),
            count_source="usage",
            status=rng.choice([200, 200, 500]),
            text="x",
        )
        assert itl_ms(r) == old_itl_ms(r)
