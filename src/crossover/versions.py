"""Engine version strings in order (PEP 440 for the forms engines use)."""

from __future__ import annotations

import re

from crossover.errors import UsageError

_VERSION = re.compile(r"^(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:\.?(a|b|rc|dev|post)\.?(\d+))?")


def version_key(version: str) -> tuple[int, int, int, int, int]:
    """Order versions like PEP 440 for the forms engines use (1.2.1, 1.3.0rc20, 0.20.0)."""
    m = _VERSION.match(version.strip().lstrip("v"))
    if not m:
        raise UsageError(f"bad version {version!r}")
    major, minor, patch = (int(x) if x else 0 for x in m.group(1, 2, 3))
    stage = {"dev": 0, "a": 1, "b": 2, "rc": 3, None: 4, "post": 5}[m.group(4)]
    return (major, minor, patch, stage, int(m.group(5) or 0))
