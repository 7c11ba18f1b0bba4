"""What a configured CMake build will compile, and how much of it is done.

CMake's Makefile generator prints a percent of its own progress marks, and on a 2-core
machine it sits at "[ 10%] Building C ggml-cpu.c.o" for minutes while the other job works
through the small files; the percent says little. The configured build tree says exactly
which object files the target needs: ``CMakeFiles/Makefile2`` lists each target's
dependencies (``a/CMakeFiles/x.dir/all: b/CMakeFiles/y.dir/all``) and each target's
``build.make`` has one rule per object (``a/CMakeFiles/x.dir/f.c.o: ...``). An object file
exists once its compile has finished (the compiler writes it last), so the count of those on
disk, against the total, is the build's real progress. Ninja prints it directly
(``[12/180]``); the Makefile generator is what a machine without ninja gets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_DEP = re.compile(r"^(\S+)\.dir/all:\s+(\S+)\.dir/all\s*$")
_OBJECT_RULE = re.compile(r"^(\S+\.o):\s")


def target_deps(makefile2: str) -> dict[str, set[str]]:
    """Target directory (``tools/server/CMakeFiles/llama-server``) -> the target
    directories it depends on, from ``CMakeFiles/Makefile2``."""
    deps: dict[str, set[str]] = {}
    for line in makefile2.splitlines():
        if m := _DEP.match(line):
            deps.setdefault(m.group(1), set()).add(m.group(2))
    return deps


def closure(deps: dict[str, set[str]], target: str) -> set[str]:
    """The target directories ``target`` (a name, ``llama-server``) needs, itself included;
    empty when no target of that name is in ``deps``."""
    roots = [t for t in deps if t.rsplit("/", 1)[-1] == target]
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        t = todo.pop()
        if t not in seen:
            seen.add(t)
            todo.extend(deps.get(t, ()))
    return seen


def object_rules(build_make: str) -> set[str]:
    """The object files one target's ``build.make`` compiles (paths relative to the build
    tree)."""
    return {m.group(1) for line in build_make.splitlines() if (m := _OBJECT_RULE.match(line))}


@dataclass(frozen=True)
class BuildPlan:
    """The object files a build of one target will produce, under ``build_dir``."""

    build_dir: Path
    objects: frozenset[str]

    @classmethod
    def read(cls, build_dir: Path, target: str) -> BuildPlan | None:
        """The plan of a tree configured with the Makefile generator; None for another
        generator (Ninja counts its own steps) or a target not found."""
        makefile2 = build_dir / "CMakeFiles" / "Makefile2"
        try:
            deps = target_deps(makefile2.read_text(errors="replace"))
        except OSError:
            return None
        objects: set[str] = set()
        for t in closure(deps, target):
            try:
                text = (build_dir / f"{t}.dir" / "build.make").read_text(errors="replace")
            except OSError:
                continue
            objects |= object_rules(text)
        return cls(build_dir, frozenset(objects)) if objects else None

    @property
    def total(self) -> int:
        return len(self.objects)

    def done(self) -> int:
        """How many of the objects are compiled (on disk) now."""
        return sum(1 for o in self.objects if (self.build_dir / o).is_file())


def estimate_left_s(done: int, done_at_start: int, total: int, elapsed_s: float) -> float | None:
    """Seconds left at the rate objects were finished so far in this build, or None until
    there is a rate to go by (a few objects, some seconds).

    Objects differ in cost (ggml-cpu.c takes minutes, most take seconds), so this is an
    estimate that settles as the build goes, not a promise."""
    made = done - done_at_start
    if made < 3 or elapsed_s < 10.0 or done >= total:
        return None if done < total else 0.0
    return (total - done) * elapsed_s / made
