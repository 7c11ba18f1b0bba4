"""Shell scripts from argument lists: ``set -euo pipefail``, every argument quoted.

Arguments are quoted with ``shlex.quote`` except a small set of variable references
(``"${VAR}"`` forms) that the scripts define at the top, so paths can be overridden
from the environment without editing the script.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

_VAR_REF = re.compile(r'^[A-Za-z0-9_=.,:/+-]*"\$\{[A-Z_][A-Z0-9_]*\}(/[A-Za-z0-9_./-]*)?"$')


def var(name: str, suffix: str = "") -> str:
    """A double-quoted reference to a script variable, e.g. ``"${MODEL_DIR}/config.json"``."""
    return f'"${{{name}}}{suffix}"'


def quote(arg: str) -> str:
    if _VAR_REF.match(arg):
        return arg
    return shlex.quote(arg)


def command_line(argv: Sequence[str], env: dict[str, str] | None = None) -> str:
    """One command, continued over lines when long; env assignments in front."""
    parts = [f"{k}={quote(v)}" for k, v in (env or {}).items()]
    parts += [quote(a) for a in argv]
    line = " ".join(parts)
    if len(line) <= 100:
        return line
    out: list[str] = []
    current = ""
    for part in parts:
        if current and part.startswith("-"):
            out.append(current)
            current = "  " + part
        else:
            current = f"{current} {part}" if current else part
    out.append(current)
    return " \\\n".join(out)


def script(header: str, variables: dict[str, str], commands: list[str]) -> str:
    """A bash script: header comment, overridable variables, then the commands."""
    lines = ["#!/usr/bin/env bash", f"# {header}", "set -euo pipefail", ""]
    for name, default in variables.items():
        lines.append(f'{name}="${{{name}:-{_dq(default)}}}"')
    if variables:
        lines.append("")
    lines.extend(commands)
    return "\n".join(lines) + "\n"


def _dq(value: str) -> str:
    """Escape for use inside a double-quoted ${VAR:-default}."""
    return re.sub(r'([\\"$`])', r"\\\1", value).replace("}", "\\}")
