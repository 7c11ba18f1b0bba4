"""``crossover verify-config LOG``: which settings took effect, per the engine's log.

Expectations come from ``--expect``/``--plan`` and, where the log starts with crossover's
launch record, from the flags crossover launched the engine with (SGLang, vLLM,
llama-server: the flags whose values the engine reports back). Log lines the user must
see (a fused-MoE config fallen back to defaults, a kernel compiled while serving) are
printed as warnings; they do not change the exit status.

Exit status: 0 when every expectation is confirmed, 3 when one is contradicted or cannot
be confirmed from the log (``--allow-unverified`` accepts the latter), 2 for bad input
(a log in which nothing of the engine's is recognized included).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

import typer

# Timestamps and level tags at the start of engine log lines, dropped in the table only.
_PREFIX = re.compile(r"^(?:\d+\.\d+\.\d+\.\d+ [IWED] |\[[^\]]*\] |\(\w+ pid=\d+\) )+")


def _show(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def evidence(fact: Any, shown: dict[int, str]) -> str:
    """What the table shows as a setting's evidence: the log line once (later settings
    read from the same line point to it), and for a setting read from a line that never
    came, what that means rather than the pattern searched for (the JSON keeps it)."""
    if fact.basis == "log-absence":
        why = f" ({fact.origin})" if fact.origin else ""
        return f"the log never shows it, though it would by then{why}"
    text = _PREFIX.sub("", fact.evidence or "")
    if len(text) > 90:
        text = text[:87] + "..."
    if not fact.line:
        return text
    first = shown.get(fact.line)
    if first is not None:
        return f"line {fact.line} (as for {first})"
    shown[fact.line] = fact.setting
    return f"line {fact.line}: {text}"


def verify_config(
    log: Annotated[Path, typer.Argument(help="engine log (stdout+stderr of its startup)")],
    engine: Annotated[
        str | None, typer.Option(help="llamacpp, transformers, vllm, sglang, trtllm, triton")
    ] = None,
    expect: Annotated[
        str | None, typer.Option(help="expected settings, e.g. cuda_graphs=on,tp=2,quant=fp8")
    ] = None,
    plan: Annotated[
        Path | None, typer.Option(help='plan.json whose "expect" object lists the settings')
    ] = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="write the result as JSON")
    ] = None,
    allow_unverified: Annotated[
        bool, typer.Option(help="exit 0 when expectations are not contradicted but unconfirmed")
    ] = False,
) -> None:
    """Print the settings an engine actually used, read from its startup log."""
    from rich.markup import escape
    from rich.table import Table

    from crossover.cli.common import check_output_file, write_output
    from crossover.cli.common import console as make_console
    from crossover.engines.asked import asked_checks
    from crossover.engines.effective import (
        check,
        effective_settings,
        expectations_from_plan,
        log_ready,
        parse_expect,
        read_log,
    )
    from crossover.errors import InvalidRunError, UsageError

    if not log.is_file():
        what = "is a folder, not a file" if log.is_dir() else "not found"
        raise UsageError(f"log file {log} {what}")
    check_output_file(json_path, "--json", keep=[log, plan])
    expected: dict[str, bool | int | float | str] = {}
    ignored: list[str] = []
    if plan is not None:
        from_plan, plan_engine, ignored = expectations_from_plan(plan)
        expected.update(from_plan)
        engine = engine or plan_engine
    if expect:
        expected.update(parse_expect(expect))
    text = read_log(log)
    settings = effective_settings(text, engine)
    _, ready = log_ready(text, settings.engine)
    if not settings.facts and not settings.warnings and ready is None:
        raise UsageError(
            f"{log}: nothing in the log was recognized as {settings.engine}'s (no setting, "
            "warning or start line); give the engine's startup log"
        )
    checks = check(settings, expected) + asked_checks(settings, skip=expected)

    out = make_console(highlight=False)
    table = Table(title=f"{settings.engine}: effective settings from {log.name}")
    for column in ("setting", "value", "basis", "evidence"):
        table.add_column(column)
    shown_lines: dict[int, str] = {}
    for fact in sorted(settings.facts.values(), key=lambda f: f.setting):
        basis = fact.basis + ("" if fact.verified else " (requested)")
        table.add_row(fact.setting, _show(fact.value), basis, escape(evidence(fact, shown_lines)))
    out.print(table)
    if checks:
        styles = {
            "match": "green",
            "mismatch": "bold red",
            "unverified": "yellow",
            "unknown": "yellow",
        }
        ctable = Table(title="expected vs effective")
        for column in ("setting", "expected", "effective", "status", "note"):
            ctable.add_column(column)
        for c in checks:
            status = f"[{styles[c.status]}]{c.status}[/]"
            ctable.add_row(
                c.setting, _show(c.expected), _show(c.effective), status, escape(c.note or "")
            )
        out.print(ctable)
    for w in settings.warnings:
        style = "bold yellow" if w.level == "warning" else "cyan"
        lines = f", {w.count} lines" if w.count > 1 else ""
        where = f" (line {w.line}{lines})" if w.line else ""
        out.print(f"[{style}]{w.level}[/]: {escape(w.message)}{where}")
    if ready is not None:
        out.print(f"ready {ready.seconds:.1f} s after its launch: {escape(ready.basis)}")
    if ignored:
        out.print(f"plan keys not checked (not readable from logs): {', '.join(ignored)}")

    bad = [c for c in checks if c.status == "mismatch"]
    unconfirmed = [c for c in checks if c.status in ("unverified", "unknown")]
    if json_path is not None:
        import json

        doc = {
            "schema": "crossover.verify/1",
            "log": str(log),
            "engine": settings.engine,
            "ok": not bad and (allow_unverified or not unconfirmed),
            "settings": {k: f.model_dump() for k, f in sorted(settings.facts.items())},
            "checks": [c.model_dump() for c in checks],
            "warnings": [w.model_dump() for w in settings.warnings],
            "launch": settings.launch.model_dump() if settings.launch else None,
            "ready": (
                {"seconds": round(ready.seconds, 3), "line": ready.line, "basis": ready.basis}
                if ready is not None
                else None
            ),
            "ignored_plan_keys": ignored,
        }
        write_output(json_path, json.dumps(doc, indent=2) + "\n", "--json")
    if bad:
        what = "; ".join(
            f"{c.setting}: expected {_show(c.expected)}, got {_show(c.effective)}" for c in bad
        )
        raise InvalidRunError(f"{len(bad)} setting(s) did not take effect as expected: {what}")
    if unconfirmed and not allow_unverified:
        names = ", ".join(c.setting for c in unconfirmed)
        raise InvalidRunError(
            f"not confirmed by the log: {names} (--allow-unverified accepts this)"
        )


EXAMPLE = (
    "\b\n"
    "Examples:\n"
    "  crossover verify-config sweep1/engines/vllm.log --expect cuda_graphs=on,tp=2\n"
    "  crossover verify-config engine.log --plan plan/plan.json --json verify.json\n"
)


def register(app: typer.Typer) -> None:
    app.command("verify-config", epilog=EXAMPLE)(verify_config)
