"""An engine that refuses a flag as it starts: which flag, and who gave it.

An engine's command line is crossover's (the flags its spec renders, and some it adds on
its own for the witnesses and the logs) and the user's (``extra_args``). A version of the
engine older than a flag exits at once with its parser's line (argparse's ``unrecognized
arguments: --x 1``, llama-server's ``invalid argument: --x``, click's ``No such option:
--x``), which alone does not say that crossover added the flag or how to leave it out.
:func:`refused_flag_note` says both, from the spec's ``added_flags``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from crossover.engines.spec import EngineSpec

#: the line each parser writes for a flag it does not know (its flags in group "flags"),
#: each as its parser words it: a CUDA ``invalid argument`` is not one of them
_REFUSALS = (
    re.compile(r"(?:^|\s)error: unrecognized arguments: (?P<flags>.+)$"),  # argparse
    re.compile(r"^error: invalid argument: (?P<flags>\S+)$"),  # llama-server (common/arg.cpp)
    re.compile(r"(?:^|\s)No such option: (?P<flags>\S+)"),  # click: transformers serve
)
#: a flag's shape: a refused flag's value (``--x -1``) is not one
_FLAG = re.compile(r"^--?[A-Za-z][\w.-]*$")


def refused_flags(log_tail: str) -> list[str]:
    """The flags an engine's parser refused, in the order it named them (a refused
    flag's value, ``--x 1``, is not one; ``--x=1`` is ``--x``)."""
    out: list[str] = []
    for line in log_tail.splitlines():
        for pattern in _REFUSALS:
            m = pattern.search(line.strip())
            if m is None:
                continue
            for token in m.group("flags").split():
                flag = token.strip("'\"").partition("=")[0]
                if _FLAG.match(flag) and flag not in out:
                    out.append(flag)
    return out


def _given(flag: str, extra_args: Sequence[str]) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in extra_args)


def refused_flag_note(spec: EngineSpec, extra_args: Sequence[str], log_tail: str) -> str | None:
    """Why the engine would not start, where its parser refused a flag: ``this SGLang does
    not know --gc-warning-threshold-secs, which crossover adds on its own (...; ...)`` (a
    flag of the spec's ``added_flags``), ``... --max-num-seqs, which crossover passes for
    the target's launch settings (the launch's parallel)`` or ``... does not know --x
    (from the target's extra_args)``; ``None`` where no flag was refused."""
    parts: list[str] = []
    for flag in refused_flags(log_tail):
        if _given(flag, extra_args):
            parts.append(f"{flag} (from the target's extra_args)")
            continue
        why = spec.added_flags.get(flag)
        if why is not None:
            parts.append(f"{flag}, which crossover adds on its own ({why})")
            continue
        knob = spec.flags.knob_of(flag)
        said = f" (the launch's {knob})" if knob else ""
        parts.append(f"{flag}, which crossover passes for the target's launch settings{said}")
    if not parts:
        return None
    return f"this {spec.display_name} does not know " + "; nor ".join(parts)
