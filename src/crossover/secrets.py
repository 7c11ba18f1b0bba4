"""Secrets kept out of what crossover writes: an environment variable or a command-line
flag whose name has a word that says it holds one (``HF_TOKEN``, ``OPENAI_API_KEY``,
``--api-key``, ``--hf-token``, ``AWS_SECRET_ACCESS_KEY``, ``--password``; not
``--max-num-batched-tokens`` or ``--tokenizer``) has its value written as ``<redacted>``
in an engine log's launch header, and is never kept with a sweep's runs. The engine
itself gets the real value; API keys for the requests come from the environment only."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

#: a word of a name (split at - and _) that says it holds a secret
SECRET_WORD = re.compile(
    r"(?:^|[-_])(?:api[-_]?key|key|token|secret|passw(?:or)?d|credentials?|auth)(?:$|[-_])",
    re.IGNORECASE,
)
#: what a secret's value is written as
REDACTED = "<redacted>"


def is_secret_name(name: str) -> bool:
    """Whether ``name`` (an environment variable, a flag's name without its dashes) has a
    word that says it holds a secret."""
    return SECRET_WORD.search(name) is not None


def redacted_env(env: Mapping[str, str | None]) -> dict[str, str | None]:
    """``env`` with the values of secret-named variables written as ``<redacted>`` (a
    variable removed, ``None``, stays ``None``)."""
    return {k: REDACTED if v is not None and is_secret_name(k) else v for k, v in env.items()}


def redacted_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` with the value of each secret-named flag (``--api-key X``, ``--api-key=X``)
    written as ``<redacted>``; a flag that follows a secret-named switch is no value."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        flag = arg.startswith("-") and len(arg) > 1 and not _number(arg)
        if hide_next and not flag:
            out.append(REDACTED)
            hide_next = False
            continue
        hide_next = False
        if flag:
            name, eq, _ = arg.lstrip("-").partition("=")
            if is_secret_name(name):
                if eq:
                    out.append(arg.split("=", 1)[0] + "=" + REDACTED)
                    continue
                hide_next = True
        out.append(arg)
    return out


def _number(arg: str) -> bool:
    try:
        float(arg)
    except ValueError:
        return False
    return True
