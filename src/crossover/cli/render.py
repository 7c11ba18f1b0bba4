"""Terminal rendering of run summaries and live progress (rich)."""

from __future__ import annotations

from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from crossover.measure import Progress
from crossover.metrics.summary import Load, RunSummary, Stats
from crossover.metrics.text import CLIENT_MARK, _f, client_mark, server_word_note
from crossover.words import plural
from crossover.workload.sessions import shown

VERDICT_STYLE = {"valid": "bold green", "unverified": "bold yellow", "invalid": "bold red"}


def progress_line(p: Progress) -> Text:
    total = f"/{p.total}" if p.total else ""
    warm = ""
    if p.warmup_done and not p.done:
        warm = f"  warm-up {p.warmup_done}"
        if p.warmup_failed:
            warm += f" ({p.warmup_failed} failed)"
    return Text.assemble(
        ("requests ", "dim"),
        f"{p.done}{total}",
        ("  failed ", "dim"),
        (str(p.failed), "red" if p.failed else ""),
        ("  tok/s ", "dim"),
        f"{p.tokens_per_s:,.0f}",
        ("  TTFT p50 ", "dim"),
        f"{_f(p.ttft_p50_ms)} ms",
        (warm, "dim"),
    )


def _warmup(s: RunSummary) -> str:
    r = s.requests
    if not r.warmup:
        return ""
    failed = f", {r.warmup_failed} failed" if r.warmup_failed else ""
    return f"   (warm-up {r.warmup}{failed})"


def _retries(s: RunSummary) -> str:
    n = s.requests.retries
    return f", {n} retried on a reused connection" if n else ""


def _achieved(load: Load) -> str:
    """What the load achieved: a closed loop's streams in flight; an open loop's arrivals
    (a Poisson schedule meets its rate only on average) and the requests in flight they
    made, so neither reads as the other."""
    inflight = _f(load.achieved_concurrency, ".2f")
    if load.mode == "concurrency":
        return f"achieved {inflight}"
    arrived = "" if load.arriving_rps is None else f"{load.arriving_rps:.3g}/s arrived, "
    return f"{arrived}{inflight} in flight on average"


def summary_table(s: RunSummary, title: str | None = None) -> Group:
    verdict = Text(s.verdict.upper(), style=VERDICT_STYLE[s.verdict])
    head = Text.assemble(
        (title + "  " if title else ""),
        "verdict: ",
        verdict,
        (server_word_note(s), "yellow"),
        f"   requests {s.requests.sent} sent, {s.requests.succeeded} ok, "
        f"{s.requests.failed} failed, {s.requests.matched} matched{_retries(s)}",
        (_warmup(s), "yellow" if s.requests.warmup_failed else "dim"),
    )
    load = s.load
    lvl = (
        f"concurrency {load.concurrency}"
        if load.mode == "concurrency"
        else f"rate {_f(load.rate_rps, 'g')} requests/s"
    )
    tp = s.throughput
    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for col in ("", "mean", "p50", "p90", "p99", "min", "max", "n"):
        t.add_column(col, justify="right" if col else "left")

    def row(name: str, st: Stats, key: str | None = None) -> None:
        def pct(p: str) -> str:
            mark = client_mark(s, f"{key}.{p}") if key else ""
            return _f(getattr(st, p), ".2f") + mark

        t.add_row(
            name,
            _f(st.mean, ".2f"),
            pct("p50"),
            pct("p90"),
            pct("p99"),
            _f(st.min, ".2f"),
            _f(st.max, ".2f"),
            str(st.count),
        )

    row("TTFT ms", s.ttft_ms, "ttft_ms")
    if s.waves is not None:  # the pooled TTFT split: sent together, then as others finished
        row("  1st wave", s.waves.first_ttft_ms)
        row("  later", s.waves.later_ttft_ms)
    row("TPOT ms", s.tpot_ms, "tpot_ms")
    row("ITL ms", s.itl_ms, "itl_ms")
    row("E2E ms", s.e2e_ms, "e2e_ms")
    if s.queue_ms.count:
        row("queue ms", s.queue_ms)
    lines: list[Text | Table] = [
        head,
        Text(
            f"{lvl} ({_achieved(load)})   "
            f"total {_f(tp.total_tokens_per_s, ',.1f')} tok/s   "
            f"output {_f(tp.output_tokens_per_s, ',.1f')} tok/s   "
            f"{_f(tp.requests_per_s, '.2f')} req/s   "
            f"(steady window {_f(s.window.duration_s, '.2f')} s of {s.duration_s:.2f} s)"
        ),
        t,
    ]
    if s.window.short is not None:  # its window caught ramp-up and drain
        lines.append(
            Text(
                f"no steady state ({s.window.short.reason}): its tokens/s and req/s are "
                'ramp-up and drain (docs/metrics.md, "Steady window, open loop")',
                style="red",
            )
        )
    if s.goodput is not None:
        lines.append(
            Text(
                f"goodput {_f(s.goodput.requests_per_s, '.2f')} req/s "
                f"({_f(None if s.goodput.fraction is None else s.goodput.fraction * 100, '.0f')}"
                f"% meet {', '.join(f'{k}<={v:g}' for k, v in s.goodput.slo.limits().items())} "
                "per request)"
            )
        )
    client = []
    if s.client_floor is not None and s.client_floor.delivery_p50_ms is not None:
        client.append(f"client floor {s.client_floor.delivery_p50_ms:.3f} ms")
    lag = s.client_loop
    if lag is not None and lag.p99_ms is not None:
        client.append(
            f"event-loop lag p50 {_f(lag.p50_ms, '.2f')} / p99 {_f(lag.p99_ms, '.2f')} / "
            f"max {_f(lag.max_ms, '.1f')} ms"
        )
    shape = s.workload.shape
    if shape:
        parts = []
        if "output_lengths" in shape:
            e = s.expected_output_tokens
            got = f" ({_f(e.min, '.0f')}-{_f(e.max, '.0f')} asked)" if e.count else ""
            parts.append(f"output {shape['output_lengths']}{got}")
        if "input_lengths" in shape:
            parts.append(f"input {shape['input_lengths']}")
        if "shared_prefix" in shape:
            parts.append(f"shared prefix {shape['shared_prefix']}")
        if "trace" in shape:
            parts.append(f"trace {shape['trace']}")
        if "sessions" in shape:
            parts.append(f"sessions of {shown(shape['sessions'])}")
        lines.append(Text("workload: " + ", ".join(parts), style="dim"))
    if s.turns:
        per = [
            f"{t.turn}: {_f(t.ttft_ms.p50, '.1f')} ms ({_f(t.prompt_tokens.mean, '.0f')} tok)"
            for t in s.turns
        ]
        lines.append(Text("TTFT p50 by turn (prompt): " + ", ".join(per), style="dim"))
    cache = s.prefix_cache
    if cache is not None and cache.hit_fraction is not None:
        lines.append(
            Text(
                f"prefix cache: {cache.hit_fraction:.0%} of prompt tokens served from the "
                f"engine's cache ({cache.cached_tokens:,} of {cache.prompt_tokens:,}, its own "
                f"count, {plural(cache.requests_reporting, 'request')})",
                style="dim",
            )
        )
    checks = s.witnesses.checks
    if checks:
        said = []
        for c in checks:
            against = f" ({c.disagreed} against)" if c.disagreed else ""
            said.append(f"{c.witness} {c.agreed}/{c.asked}{against}")
        lines.append(Text("witnesses asked (agreed/asked): " + ", ".join(said), style="dim"))
    if client:
        lines.append(Text("client: " + "   ".join(client), style="dim"))
    if s.client_made:
        lines.append(
            Text(
                f"{CLIENT_MARK} within reach of the client's own event-loop lag: could be the "
                "client's, not the engine's (client_made_percentiles; try --workers N)",
                style="yellow",
            )
        )
    for p in s.problems:
        style = {"error": "red", "warning": "yellow", "info": "dim"}[p.severity]
        lines.append(Text.assemble((f"{p.severity} {p.code}", style), f": {p.message}"))
    return Group(*lines)


def print_summary(console: Console, s: RunSummary, title: str | None = None) -> None:
    console.print(summary_table(s, escape(title) if title else None))
