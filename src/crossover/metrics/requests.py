"""Per-request metrics from one raw record (docs/metrics.md, "Per request").

All results are milliseconds; a metric with no value is ``None``, never 0.
"""

from __future__ import annotations

from crossover.records.model import RequestRecord

NS_PER_MS = 1_000_000.0


def ttft_ms(r: RequestRecord) -> float | None:
    if r.t_first_ns is None:
        return None
    return (r.t_first_ns - r.t_send_ns) / NS_PER_MS


def queue_ms(r: RequestRecord) -> float | None:
    if r.t_scheduled_ns is None:
        return None
    return (r.t_send_ns - r.t_scheduled_ns) / NS_PER_MS


def e2e_ms(r: RequestRecord) -> float | None:
    if r.t_done_ns is None or not r.ok:
        return None
    return (r.t_done_ns - r.t_send_ns) / NS_PER_MS


def tpot_ms(r: RequestRecord) -> float | None:
    """``(t_last - t_first) / (N - 1)`` with N the counted completion tokens."""
    n = r.completion_tokens
    if n is None or n < 2 or r.t_first_ns is None or r.t_last_ns is None or not r.ok:
        return None
    return (r.t_last_ns - r.t_first_ns) / (n - 1) / NS_PER_MS


def tokens_per_chunk(r: RequestRecord) -> list[int] | None:
    """Tokens carried by each token-carrying chunk.

    Exact when the server said so per chunk, or when the count equals the number
    of chunks. Otherwise (several tokens per chunk) the counted total is spread
    over the chunks in proportion to their text, at least one each. ``None`` when
    the total is unknown: chunks are never taken for tokens.
    """
    n_chunks = len(r.chunk_arrival_ns)
    if r.chunk_tokens is not None and len(r.chunk_tokens) == n_chunks:
        return list(r.chunk_tokens)
    total = r.completion_tokens
    if total is None or n_chunks == 0:
        return None
    if total == n_chunks:
        return [1] * n_chunks
    if total < n_chunks:
        return None  # the count contradicts the stream: usage_mismatch says so
    chars = r.chunk_chars
    char_total = sum(chars)
    if char_total <= 0:
        shares = [total / n_chunks] * n_chunks
    else:
        shares = [total * c / char_total for c in chars]
    alloc = [max(1, int(s)) for s in shares]
    while sum(alloc) > total:  # the at-least-one floor overshot: take from the largest
        alloc[max(range(n_chunks), key=lambda i: alloc[i])] -= 1
    left = total - sum(alloc)
    order = sorted(range(n_chunks), key=lambda i: shares[i] - alloc[i], reverse=True)
    for i in order[:left]:
        alloc[i] += 1
    return alloc


def chunk_gaps_ms(r: RequestRecord) -> list[float]:
    a = r.chunk_arrival_ns
    return [(a[i] - a[i - 1]) / NS_PER_MS for i in range(1, len(a))]


def itl_ms(r: RequestRecord) -> list[float]:
    """Per-token gaps: each chunk gap after the first, divided over its tokens,
    once per token (so pooled ITL weights every token equally)."""
    if not r.ok:
        return []
    counts = tokens_per_chunk(r)
    if counts is None:
        return []
    a = r.chunk_arrival_ns
    out: list[float] = []
    for i in range(1, len(a)):
        k = counts[i]
        if k <= 0:
            continue
        per = (a[i] - a[i - 1]) / k / NS_PER_MS
        out.extend([per] * k)
    return out
