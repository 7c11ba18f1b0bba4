"""The package graph of ``src/crossover`` has no cycle and the CLI sits on top.

Every ``import crossover.X`` / ``from crossover.X import`` (at any depth of a module, a
lazy import inside a function included) is an edge from the importing package to X.
``__main__.py`` files are entry points, the top layer by nature (``python -m
crossover.calibration`` starts the calibration server through its CLI command), so they
are left out of the graph.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "crossover"


def _package(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py") if len(rel.parts) > 1 else rel.stem


def _edges() -> dict[str, dict[str, set[str]]]:
    edges: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for path in SRC.rglob("*.py"):
        if path.name == "__main__.py":
            continue
        here = _package(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
                # `from crossover import x` names a subpackage or module x
                if node.module == "crossover":
                    names = [f"crossover.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                parts = name.split(".")
                if parts[0] == "crossover" and len(parts) > 1 and parts[1] != here:
                    edges[here][parts[1]].add(str(path.relative_to(SRC)))
    return edges


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_no_import_cycle_between_packages() -> None:
    edges = _edges()
    graph = {a: set(b) for a, b in edges.items()}
    cycle = _cycle(graph)
    if cycle:
        where = [f"{a} -> {b}: {sorted(edges[a][b])[:3]}" for a, b in pairwise(cycle)]
        raise AssertionError("import cycle: " + "; ".join(where))


def test_only_entry_points_import_the_cli() -> None:
    users = {a: sorted(b["cli"]) for a, b in _edges().items() if "cli" in b}
    assert users == {}


def test_the_engine_registry_imports_no_config_that_imports_it() -> None:
    edges = _edges()
    # the registry lives in engines/; engines may import only lower layers
    assert not {"cli", "sweep", "advise", "plan", "report", "capacity"} & set(edges["engines"])


def test_the_checker_sees_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_entry_points_import_no_cli_but_the_top_one() -> None:
    """``python -m crossover.calibration`` starts the server through the calibration
    package's own command, not through the CLI package (no upward arrow)."""
    for path in SRC.rglob("__main__.py"):
        if path.parent == SRC:
            continue  # ``python -m crossover`` is the CLI
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("crossover.cli"), path
