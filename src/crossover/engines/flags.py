"""One table per engine between crossover's settings and the engine's flags.

The same table is read both ways: the engine's launch builder turns ``EngineConfig``
knobs into flags with it (``FlagTable.args``), and ``verify-config`` reads a launch
record's argv back into settings with it (``FlagTable.requested``: what was asked, for
when the log is silent; ``FlagTable.asked``: the flags whose value the engine's log
reports back one to one, each checked against the log). A flag has one setting name on
both sides, so a knob renamed in one place cannot silently drift from the other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from crossover.engines.logpatterns import Value

#: values that leave the choice to the engine: nothing to check them against
ENGINE_CHOOSES = frozenset({"auto", "-1"})


def _plain(value: Any) -> str:
    return str(value)


def fmt_g(value: Any) -> str:
    """A float as the user would write it (0.9, not 0.90000000000000002)."""
    return f"{value:g}"


@dataclass(frozen=True)
class Flag:
    """A flag that takes a value.

    ``names[0]`` is what crossover emits; the others are aliases a user may pass in
    ``extra_args``, read back the same way. ``knob`` is the ``EngineConfig`` field the
    builder emits it from (None: read back only). ``requested``: recorded as the asked
    value when the log is silent; ``echoed``: the engine's log reports the value back one
    to one, so a difference is a setting that did not take effect as asked."""

    setting: str
    names: tuple[str, ...]
    knob: str | None = None
    requested: bool = False
    echoed: bool = False
    render: Callable[[Any], str] = _plain


@dataclass(frozen=True)
class Switch:
    """A flag without a value that asks for ``setting = value``."""

    name: str
    setting: str
    value: Value
    requested: bool = False
    echoed: bool = False


def typed(raw: str) -> Value:
    """A flag's text as the value a log reports: int, then float, else the string."""
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        return float(raw)
    except ValueError:
        return raw


@dataclass(frozen=True)
class FlagTable:
    flags: tuple[Flag, ...] = ()
    switches: tuple[Switch, ...] = ()

    def by_knob(self, knob: str) -> Flag:
        for flag in self.flags:
            if flag.knob == knob:
                return flag
        raise KeyError(knob)

    def knob_of(self, name: str) -> str | None:
        """The launch setting (``EngineConfig`` field) a flag of this table, by any of its
        names, is rendered from; ``None`` for a flag read back only or not in the table."""
        for flag in self.flags:
            if name in flag.names and flag.knob is not None:
                return flag.knob
        return None

    def args(self, config: Any, *knobs: str) -> list[str]:
        """``[flag, value, ...]`` for each knob that is set (not None, not empty), in the
        order given."""
        out: list[str] = []
        for knob in knobs:
            value = getattr(config, knob)
            if value is None or value == "":
                continue
            flag = self.by_knob(knob)
            out += [flag.names[0], flag.render(value)]
        return out

    def requested(self, argv: list[str]) -> dict[str, tuple[Value, str]]:
        """``setting -> (value, evidence)`` for the flags recorded as requested (the first
        one given wins, as the launch facts always read it)."""
        names = {n: f.setting for f in self.flags if f.requested for n in f.names}
        out: dict[str, tuple[Value, str]] = {}
        for i, arg in enumerate(argv[:-1]):
            if arg in names:
                out.setdefault(names[arg], (typed_fact(argv[i + 1]), f"{arg} {argv[i + 1]}"))
        return out

    def given(self, argv: list[str], setting: str) -> tuple[str, str] | None:
        """``(value, the flag as given)`` of ``setting`` in ``argv``, ``--flag VALUE`` or
        ``--flag=VALUE`` under any of its names, the last one given winning as argparse and
        click read them; ``None`` where no flag gives it."""
        names = {n for f in self.flags if f.setting == setting for n in f.names}
        out: tuple[str, str] | None = None
        for i, arg in enumerate(argv):
            flag, eq, inline = arg.partition("=")
            if flag in names:
                raw = inline if eq else (argv[i + 1] if i + 1 < len(argv) else None)
                if raw is not None:
                    out = (raw, f"{flag} {raw}")
        return out

    def gpus(
        self, *settings: str, unknown: tuple[str, ...] = ()
    ) -> Callable[[list[str]], GpuAsk | None]:
        """A spec's ``launch_gpus``: the GPUs one launch uses, the product of ``settings``
        (tensor x pipeline x data parallel) as its argv gives them; ``None`` where none
        is given, one is not a whole number (``auto``: the engine chooses), or a flag of
        ``unknown`` is given (``--nnodes``: the launch spans nodes, its share of this one
        is not read here)."""

        def read(argv: list[str]) -> GpuAsk | None:
            if any(a.partition("=")[0] in unknown for a in argv):
                return None
            return gpu_ask([self.given(argv, s) for s in settings])

        return read

    def requested_switches(self, argv: list[str]) -> list[Switch]:
        return [s for s in self.switches if s.requested and s.name in argv]

    def asked(self, argv: list[str]) -> dict[str, tuple[Value, str]]:
        """``setting -> (asked value, the flag as given)`` for the flags the log reports
        back (last one wins, as argparse does)."""
        values = {n: f.setting for f in self.flags if f.echoed for n in f.names}
        switches = {s.name: s for s in self.switches if s.echoed}
        out: dict[str, tuple[Value, str]] = {}
        for i, arg in enumerate(argv):
            flag, eq, inline = arg.partition("=")
            if flag in values:
                raw = inline if eq else (argv[i + 1] if i + 1 < len(argv) else None)
                if raw is not None and raw.strip().lower() not in ENGINE_CHOOSES:
                    out[values[flag]] = (typed(raw), f"{flag} {raw}")
            elif arg in switches:
                out[switches[arg].setting] = (switches[arg].value, arg)
        return out


@dataclass(frozen=True)
class GpuAsk:
    """The GPUs one launch of an engine uses (its tensor x pipeline parallel size), and
    the flags that ask for them as given (``--tensor-parallel-size 4``)."""

    count: int
    asked: str


def gpu_ask(given: list[tuple[str, str] | None]) -> GpuAsk | None:
    """The product of the ``(value, as given)`` sizes given (``None``: not given, 1),
    said by those that are not 1 (by the first where all are); ``None`` where none is
    given or one is not a whole number."""
    count = 1
    said: list[str] = []
    ones: list[str] = []
    for one in given:
        if one is None:
            continue
        raw, flag = one
        if not raw.strip().isdigit():
            return None
        count *= int(raw)
        (ones if int(raw) == 1 else said).append(flag)
    if not said and not ones:
        return None
    return GpuAsk(count, " x ".join(said or ones[:1]))


def typed_fact(raw: str) -> Value:
    """Launch facts read digits as int and keep signs and words as written."""
    if raw.isdigit():
        return int(raw)
    try:
        return float(raw)
    except ValueError:
        return raw
