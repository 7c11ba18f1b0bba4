"""What crossover asked at launch, checked against what the engine's log says it took.

The launch record (``# crossover-launch:``, the log's first line) holds the argv the
adapter built. Where an engine reports a flag's value back one to one (SGLang's
``ServerArgs`` and scheduler lines, vLLM's engine config line, llama-server's slot
count), a difference is a setting that did not take effect as asked: SGLang lowering
``max_running_requests`` to fit memory, a deprecated alias ignored, a value overridden
by a config file. Flags whose logged value means something else (``-ngl 999`` against
the layers offloaded) are not listed.
"""

from __future__ import annotations

from collections.abc import Iterable

from crossover.engines import logpatterns as lp
from crossover.engines import registry
from crossover.engines.effective import Check, EffectiveSettings, values_match


def asked(engine: str, argv: list[str]) -> dict[str, tuple[lp.Value, str]]:
    """``setting -> (asked value, the flag as given)`` from a launch argv, through the
    engine's flag table (last one wins, as argparse does)."""
    return registry.get(engine).flags.asked(argv)


def asked_checks(settings: EffectiveSettings, skip: Iterable[str] = ()) -> list[Check]:
    """One check per asked setting the log reports (``skip``: settings the user's own
    expectations already cover). A setting the log does not report is left out: the
    launch value is then only what was requested, shown as such among the facts."""
    if settings.launch is None:
        return []
    skipped = set(skip)
    checks: list[Check] = []
    for setting, (value, flag) in asked(settings.engine, settings.launch.argv).items():
        fact = settings.facts.get(setting)
        if setting in skipped or fact is None or fact.value is None:
            continue
        if fact.basis not in ("log", "log-absence"):
            continue
        same = values_match(value, fact.value)
        checks.append(
            Check(
                setting=setting,
                expected=value,
                effective=fact.value,
                status="match" if same else "mismatch",
                basis=fact.basis,
                evidence=fact.evidence,
                line=fact.line,
                note=f"asked at launch: {flag}",
                source="launch",
            )
        )
    return checks
