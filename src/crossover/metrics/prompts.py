"""The prompt count and usage's own total against what the tool knows.

crossover built every prompt to an exact token count with the tokenizer (the prompt's
own count), so the server's ``usage.prompt_tokens`` is checked against it both ways:
fewer means the server truncated or under-counts the prompt; more than special tokens
(and, on the chat endpoint, the chat template's tokens where the tokenizer can count
them) means it over-reports, which over-states total tok/s. Usage's ``total_tokens``,
where sent, must be ``prompt_tokens + completion_tokens``.

Sessions on the chat endpoint send each turn's history as messages, and a template adds a
role header per message: turn t's prompt carries more template tokens than turn 0's. That
difference (``turn_shifts``: counted with the tokenizer, or else each turn's median offset
less turn 0's) is taken off each request's offset before the checks, which then compare
every turn as they compare one-message prompts.

Pure functions of the records and the run's context.
"""

from __future__ import annotations

from crossover.metrics.context import RunContext
from crossover.metrics.summary import Problem, PromptWitnesses, WitnessCheck, add_problem
from crossover.records.model import RequestRecord
from crossover.words import plural, verb

#: a server may count at most this many prompt tokens fewer than the prompt has
#: (tokenizers can differ at the first word's boundary)
PROMPT_FEWER_TOKENS = 1
#: and at most this many more than the prompt and its chat template have (BOS, EOS and
#: the like, which the tool's count leaves out)
PROMPT_MORE_TOKENS = 3


def template_tokens(ctx: RunContext) -> int | None:
    """Tokens the server adds around each prompt besides special tokens: none on the
    completions endpoint, the chat template's on chat where the tokenizer counted them,
    else unknown (``None``)."""
    if ctx.endpoint == "completions":
        return 0
    return ctx.chat_template_tokens


#: tokens turn t's chat template adds beyond turn 0's, by turn (``turn_shifts``)
Shifts = dict[int, int]


def _turn(r: RequestRecord, ctx: RunContext) -> int | None:
    """The session turn of a request (its prompt's place in the run's sequence); None
    without sessions, and for the prompt probe (one message, not a turn)."""
    from crossover.load.probe import PROBE_PROMPT_ID

    if not ctx.turns or r.prompt_id is None or r.prompt_id >= PROBE_PROMPT_ID:
        return None
    return r.prompt_id % ctx.turns


def turn_shifts(records: list[RequestRecord], ctx: RunContext) -> Shifts:
    """With sessions on the chat endpoint: the template tokens turn t's history adds
    beyond turn 0's (a role header per message), by turn; counted where the tokenizer
    could (``chat_template_by_turn``), else each turn's median offset less turn 0's (the
    checks then hold each turn to its own offset). Empty otherwise."""
    if ctx.endpoint != "chat" or not ctx.turns or ctx.turns < 2:
        return {}
    by = ctx.chat_template_by_turn
    if by:
        return {t: n - by[0] for t, n in enumerate(by)}
    seen: dict[int, list[int]] = {}
    for r in records:
        t = _turn(r, ctx)
        if t is not None and r.prompt_tokens is not None and r.expected_prompt_tokens is not None:
            seen.setdefault(t, []).append(r.prompt_tokens - r.expected_prompt_tokens)
    if 0 not in seen:
        return {}
    med = {t: sorted(v)[len(v) // 2] for t, v in seen.items()}
    return {t: m - med[0] for t, m in med.items()}


def _offset(r: RequestRecord, ctx: RunContext, shifts: Shifts) -> int | None:
    """The server's prompt count less the prompt's own (and its turn's extra template)."""
    if r.prompt_tokens is None or r.expected_prompt_tokens is None:
        return None
    t = _turn(r, ctx) if shifts else None
    return r.prompt_tokens - r.expected_prompt_tokens - (shifts.get(t, 0) if t is not None else 0)


def _offsets(ok: list[RequestRecord], ctx: RunContext, shifts: Shifts) -> list[int]:
    return [o for r in ok if (o := _offset(r, ctx, shifts)) is not None]


def prompt_agrees(r: RequestRecord, template: int | None, ctx: RunContext, shifts: Shifts) -> bool:
    """One request's prompt count against the prompt's own (and its template's)."""
    offset = _offset(r, ctx, shifts)
    if offset is None:
        return False
    if offset < -PROMPT_FEWER_TOKENS:
        return False
    return template is None or offset - template <= PROMPT_MORE_TOKENS


def _grows(pairs: list[tuple[int, int]]) -> bool:
    """The offset grows with the prompt's length: the server counts more than one token
    per prompt token (a count that scales, not a template's constant)."""
    n = len(pairs)
    mean_e = sum(e for e, _ in pairs) / n
    mean_o = sum(o for _, o in pairs) / n
    return sum((e - mean_e) * (o - mean_o) for e, o in pairs) > 0


def check_prompts(
    problems: list[Problem],
    ok: list[RequestRecord],
    ctx: RunContext,
    warm: list[RequestRecord] | None = None,
) -> None:
    """The measured requests' prompt counts against their own, with the warm-up's
    (``warm``: the prompt probe's among them, a prompt of another length) in the
    comparison of offsets: the offset must be the same whatever the prompt."""
    every = ok + [r for r in warm or [] if r.ok]
    shifts = turn_shifts(every, ctx)
    offsets = _offsets(ok, ctx, shifts)
    pairs = [
        (r.expected_prompt_tokens, o)
        for r in every
        if r.expected_prompt_tokens is not None and (o := _offset(r, ctx, shifts)) is not None
    ]
    template = template_tokens(ctx)
    if offsets:
        all_offsets = [o for _, o in pairs]
        spread = max(all_offsets) - min(all_offsets)
        med = sorted(offsets)[len(offsets) // 2]
        fewer = [o for o in offsets if o < -PROMPT_FEWER_TOKENS]
        if fewer:
            add_problem(
                problems,
                "prompt_tokens_mismatch",
                "error",
                len(fewer),
                f"{plural(len(fewer), 'request')} {verb(len(fewer), 'reports', 'report')} "
                "fewer prompt tokens than their prompts have "
                f"(by {-max(fewer)} to {-min(fewer)}): the server truncated the prompts or "
                "under-counts them, and prompt throughput is under-stated",
            )
        elif spread > 1 and len({e for e, _ in pairs}) > 1 and _grows(pairs):
            (e1, o1), (e2, o2) = min(pairs), max(pairs)
            add_problem(
                problems,
                "prompt_tokens_inflated",
                "error",
                len(offsets),
                f"the server's prompt count grows faster than the prompts: a prompt of {e1} "
                f"tokens was counted {e1 + o1}, one of {e2} counted {e2 + o2} (a template "
                "adds the same to every prompt): prompt tokens are over-reported, and total "
                "tok/s is over-stated",
            )
        elif spread > 1:
            add_problem(
                problems,
                "prompt_tokens_mismatch",
                "error",
                len(offsets),
                f"reported prompt tokens differ from the prompts' counts by {min(all_offsets)}"
                f" to {max(all_offsets)}: prompt lengths are not matched",
            )
        elif template is not None and med - template > PROMPT_MORE_TOKENS:
            sent = sum(r.expected_prompt_tokens or 0 for r in ok) / len(ok) + template
            where = (
                "the completions endpoint adds no template"
                if ctx.endpoint == "completions"
                else f"the chat template adds {template}"
            )
            add_problem(
                problems,
                "prompt_tokens_inflated",
                "error",
                len(offsets),
                f"the server reports {med} more prompt tokens than each prompt has ({where}, "
                f"special tokens at most {PROMPT_MORE_TOKENS}): prompt tokens are "
                f"over-reported, {100 * med / max(sent, 1):.0f}% of the prompt, and total "
                "tok/s is over-stated",
            )
        elif template is None and med > PROMPT_MORE_TOKENS:
            probed = len({e for e, _ in pairs}) > 1
            why = (
                "the same for a prompt of another length, so a template's"
                if probed
                else "a chat template, whose tokens the tokenizer cannot count here"
            )
            add_problem(
                problems,
                "prompt_tokens_mismatch",
                "info" if probed else "warning",
                len(offsets),
                f"the server counts {med} more prompt tokens than each prompt has on the chat "
                f"endpoint ({why}): compare engines on the same endpoint",
            )
    else:
        pts = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
        if pts and ctx.input_tokens is not None and max(pts) - min(pts) > 2:
            add_problem(
                problems,
                "prompt_tokens_mismatch",
                "warning",
                len(pts),
                f"reported prompt tokens range from {min(pts)} to {max(pts)}: "
                "give --tokenizer for exact prompt lengths",
            )


def total_disagrees(r: RequestRecord) -> bool:
    """Usage's own total is not its prompt and completion counts added up."""
    p, c, t = r.prompt_tokens, r.completion_tokens, r.total_tokens
    return (
        r.count_source == "usage"
        and t is not None
        and p is not None
        and c is not None
        and (t != p + c)
    )


def check_usage_total(problems: list[Problem], ok: list[RequestRecord]) -> None:
    bad = [r for r in ok if total_disagrees(r)]
    if bad:
        r0 = bad[0]
        whose = plural(len(bad), "request's", "requests'")
        add_problem(
            problems,
            "usage_total_mismatch",
            "error",
            len(bad),
            f"{whose} usage.total_tokens is not prompt_tokens + completion_tokens (first: "
            f"{r0.total_tokens} against {r0.prompt_tokens} + {r0.completion_tokens}): usage "
            "contradicts itself",
        )


def prompt_witnesses(ok: list[RequestRecord]) -> PromptWitnesses:
    def total(values: list[int | None]) -> int | None:
        if not values or any(v is None for v in values):
            return None
        return sum(v for v in values if v is not None)

    return PromptWitnesses(
        usage=total([r.prompt_tokens for r in ok]),
        prompts=total([r.expected_prompt_tokens for r in ok]),
    )


def prompt_checks(ok: list[RequestRecord], ctx: RunContext) -> list[WitnessCheck]:
    """The prompt count against the prompts' own, and usage's total against its parts."""
    checks = []
    both = [r for r in ok if r.prompt_tokens is not None and r.expected_prompt_tokens is not None]
    if both:
        template = template_tokens(ctx)
        shifts = turn_shifts(both, ctx)
        agreed = sum(1 for r in both if prompt_agrees(r, template, ctx, shifts))
        checks.append(
            WitnessCheck(
                count="prompt_tokens",
                witness="prompts",
                asked=len(both),
                agreed=agreed,
                disagreed=len(both) - agreed,
            )
        )
    totals = [
        r
        for r in ok
        if r.total_tokens is not None
        and r.prompt_tokens is not None
        and r.completion_tokens is not None
    ]
    if totals:
        bad = sum(1 for r in totals if total_disagrees(r))
        checks.append(
            WitnessCheck(
                count="total_tokens",
                witness="prompt_plus_completion",
                asked=len(totals),
                agreed=len(totals) - bad,
                disagreed=bad,
            )
        )
    return checks
