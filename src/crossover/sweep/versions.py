"""Engine versions as a resumed sweep compares them: the version a stored run was
measured with, and whether two version strings name one engine build.

An engine's version is read once it has started, by the first of its adapter's probes
that answers (``RunningEngine.probe_version``), so one build can read two ways: llama.cpp
answers ``/props`` with ``b4567-abc1234`` and ``--version`` with ``4567 (abc1234)``. Two
strings name one build when they are equal, or when the version marks in them (a commit
hash, a dotted release, a build number) are the same, or those of one hold the other's."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crossover.records.store import RunRow

#: a version mark: a dotted release with what follows it (0.26.0, 0.6.4rc1,
#: 0.6.4.dev15+g5678def, 0.26.0+cu128: a release candidate, a nightly or another build is
#: another version), a commit hash (7 to 40 hex digits with a letter), a build number (3
#: digits or more)
_MARK = re.compile(r"\d+(?:\.\d+)+(?:[.+_-]?[0-9a-z]+)*|\b[0-9a-f]*[a-f][0-9a-f]*\b|\b\d{3,}\b")
#: a version that says it is not known (llama.cpp's tree without git metadata)
_UNKNOWN = re.compile(r"^(?:b0-)?unknown$|^0 \(unknown\)$|\bcommit unknown\b", re.IGNORECASE)
#: the build label of a binary crossover built (cpu, cuda-sm90): another label, another build
_LABEL = re.compile(r"built by crossover: ([^)\s]+)")
#: the versions of replicas that answer different ones, as a URL target keeps them
REPLICAS_JOIN = " + "


def marks(version: str) -> frozenset[str]:
    """The version marks of ``version``: ``b4567-abc1234`` -> {4567, abc1234}."""
    found = set()
    for m in _MARK.finditer(version.lower()):
        text = m.group(0)
        if re.fullmatch(r"[0-9a-f]+", text) and not text.isdigit() and len(text) < 7:
            continue  # a short word of hex letters ("cafe", "be"), not a hash
        found.add(text.rstrip(".-_+"))
    # b4567: a build number after its b
    found.update(m.group(1) for m in re.finditer(r"\bb(\d{3,})\b", version.lower()))
    found.update(f"label:{m.group(1)}" for m in _LABEL.finditer(version))
    return frozenset(found)


def same_version(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` name one build: equal, or with the same version marks (or
    those of one holding all of the other's)."""
    if a == b:
        return True
    if REPLICAS_JOIN in a or REPLICAS_JOIN in b:  # replicas' versions: each the same
        each_a, each_b = a.split(REPLICAS_JOIN), b.split(REPLICAS_JOIN)
        return len(each_a) == len(each_b) and all(
            same_version(x, y) for x, y in zip(sorted(each_a), sorted(each_b), strict=True)
        )
    ma, mb = marks(a), marks(b)
    return bool(ma and mb) and (ma <= mb or mb <= ma)


def known_version(text: object) -> str | None:
    """``text`` as a version, or ``None`` where it is none or says it is not known."""
    if not isinstance(text, str) or not text.strip() or _UNKNOWN.search(text):
        return None
    return text


def run_version(row: RunRow) -> str | None:
    """The engine version a stored run was measured with, where its engine said one."""
    run = row.context.get("context")
    engine = run.get("engine") if isinstance(run, dict) else None
    return known_version(engine.get("version") if isinstance(engine, dict) else None)
