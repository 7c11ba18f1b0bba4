"""The package graph of ``src/crossover`` points down its layers, has no circle, and only
``python -m crossover`` sits above the CLI.

Every ``import crossover.X``, ``from crossover.X import``, ``from crossover import X`` and
relative import (at any depth of a module, a lazy import inside a function included) is
an edge from the importing package (or top-level module) to X. A subpackage's
``__main__.py`` belongs to its package: ``python -m crossover.calibration`` starts the
calibration server through the calibration package's own command, so an import of the
CLI there is an upward arrow and a circle, caught like any other. Only
``crossover/__main__.py`` (node ``__main__``) is the entry point above the CLI.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "crossover"

#: bottom to top: a package may import its own layer's and lower layers' packages only
#: (within a layer the circle check still holds). The data flows up: spec -> workload ->
#: load (dialect + transport) -> records -> metrics -> sweep/analysis -> report. Moving a
#: package to another layer is a decision made here, not a side effect of an import.
LAYERS: tuple[frozenset[str], ...] = tuple(
    frozenset(layer.split())
    for layer in (
        "errors versions multicast defaults tasks optional files words pipes devices secrets",
        "builds calibration dialects records",
        # workload reads a GGUF's vocabulary through models (the tokenizer.json it builds)
        "models engines transport workload",
        "spec",
        "load quality",
        "metrics",
        "measure",
        "analysis advise",
        "sweep report plan commbench",
        "capacity decide",
        "cli",
        "__main__",
    )
)


def _node(path: Path, root: Path) -> str:
    rel = path.relative_to(root)
    return rel.parts[0].removesuffix(".py") if len(rel.parts) > 1 else rel.stem


def _exists(root: Path, name: str) -> bool:
    return (root / name).is_dir() or (root / f"{name}.py").is_file()


def _imported(node: ast.AST, package: list[str]) -> list[str]:
    """Dotted names an import statement reaches (``package``: the importing module's
    package, for relative imports)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        up = package[: len(package) - (node.level - 1)]
        base = ".".join([*up, *([base] if base else [])])
    # `from crossover import x` (or `from .. import x`) names a subpackage or module x
    if base == "crossover":
        return [f"crossover.{a.name}" for a in node.names]
    return [base]


def _edges(root: Path = SRC) -> dict[str, dict[str, set[str]]]:
    edges: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for path in root.rglob("*.py"):
        here = _node(path, root)
        rel = path.relative_to(root.parent)
        package = [*rel.parts[:-1]]  # crossover/calibration/__main__.py -> crossover.calibration
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for name in _imported(node, package):
                parts = name.split(".")
                if (
                    parts[0] == "crossover"
                    and len(parts) > 1
                    and parts[1] != here
                    and _exists(root, parts[1])  # not a name of crossover/__init__.py
                ):
                    edges[here][parts[1]].add(str(path.relative_to(root)))
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


def _layer(name: str) -> int:
    for k, layer in enumerate(LAYERS):
        if name in layer:
            return k
    raise AssertionError(f"{name} is in no layer: add it to LAYERS in tests/test_layering.py")


def _upward(edges: dict[str, dict[str, set[str]]]) -> list[str]:
    return [
        f"{a} -> {b}: {sorted(files)[:3]}"
        for a, to in sorted(edges.items())
        for b, files in sorted(to.items())
        if _layer(b) > _layer(a)
    ]


def test_no_import_cycle_between_packages() -> None:
    edges = _edges()
    graph = {a: set(b) for a, b in edges.items()}
    cycle = _cycle(graph)
    if cycle:
        where = [f"{a} -> {b}: {sorted(edges[a][b])[:3]}" for a, b in pairwise(cycle)]
        raise AssertionError("import cycle: " + "; ".join(where))


def test_no_import_points_up_the_layers() -> None:
    assert _upward(_edges()) == []


def test_every_package_has_a_layer() -> None:
    names = {_node(p, SRC) for p in SRC.rglob("*.py")} - {"__init__"}
    assert sorted(n for n in names if not any(n in layer for layer in LAYERS)) == []
    assert sorted(n for layer in LAYERS for n in layer if not _exists(SRC, n)) == []


def test_only_the_entry_point_imports_the_cli() -> None:
    users = {a: sorted(b["cli"]) for a, b in _edges().items() if "cli" in b}
    assert set(users) <= {"__main__"}, users


def test_the_engine_registry_imports_no_config_that_imports_it() -> None:
    edges = _edges()
    # the registry lives in engines/; engines may import only lower layers
    assert not {"cli", "sweep", "advise", "plan", "report", "capacity"} & set(edges["engines"])


def test_the_checker_sees_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def _tree(root: Path, files: dict[str, str]) -> Path:
    src = root / "crossover"
    for rel, text in {"__init__.py": "", **files}.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text, encoding="utf-8")
    return src


def test_the_checker_sees_a_subpackage_entry_point_reaching_up_to_the_cli(
    tmp_path: Path,
) -> None:
    """``python -m crossover.calibration`` importing the CLI, written any of four ways, is
    an upward arrow and a circle (the CLI imports the calibration command)."""
    forms = [
        "from crossover.cli.app import main\n",
        "import crossover.cli.app\n",
        "from crossover import cli\n",
        "def main():\n    from ..cli import app\n",
    ]
    for k, form in enumerate(forms):
        src = _tree(
            tmp_path / str(k),
            {
                "errors.py": "",
                "cli/__init__.py": "",
                "cli/app.py": "from crossover.calibration.command import serve\n",
                "calibration/__init__.py": "",
                "calibration/command.py": "from crossover.errors import UsageError\n",
                "calibration/__main__.py": form,
            },
        )
        edges = _edges(src)
        assert edges["calibration"]["cli"] == {"calibration/__main__.py"}, form
        assert _cycle({a: set(b) for a, b in edges.items()}) == [
            "calibration",
            "cli",
            "calibration",
        ]
        assert _upward(edges) == ["calibration -> cli: ['calibration/__main__.py']"]


def test_the_checker_sees_an_upward_arrow_without_a_circle(tmp_path: Path) -> None:
    src = _tree(tmp_path, {"spec/__init__.py": "", "spec/slo.py": "import crossover.metrics\n", "metrics/__init__.py": ""})  # fmt: skip
    edges = _edges(src)
    assert _cycle({a: set(b) for a, b in edges.items()}) is None
    assert _upward(edges) == ["spec -> metrics: ['spec/slo.py']"]
