"""Engine names are written where engines are declared, not where code branches on them.

The count is the project's own grep, run in Python:

    grep -rnoE "[\"'](vllm|llamacpp|...)[\"']" src/crossover --include=*.py
      | grep -v engines/specs/ | grep -v engines/registry.py

over every module but the advisor's (``advise/`` and ``cli/advise.py``, counted by their
own test). What a module needs to know of an engine it asks the engine's spec (its
dialect, install kind, model kind, Triton-hosted model, ...).
"""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "crossover"
LITERAL = re.compile(r"[\"'](vllm|llamacpp|sglang|trtllm|transformers|triton|lmdeploy)[\"']")
#: where engine names belong (the grep's exclusions)
DECLARED = ("engines/specs/", "engines/registry.py")
#: counted by the advisor's own test
ELSEWHERE = ("advise/", "cli/advise.py")
MAX_HITS = 4


def engine_literals(src: Path = SRC) -> list[str]:
    """``path:line:match`` for every engine-name literal outside the declarations."""
    hits: list[str] = []
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        if any(d in rel for d in DECLARED) or rel.startswith(ELSEWHERE):
            continue
        for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            hits += [f"{rel}:{no}:{m.group(0)}" for m in LITERAL.finditer(line)]
    return hits


def test_engine_names_stay_in_the_specs_and_the_registry() -> None:
    hits = engine_literals()
    assert len(hits) <= MAX_HITS, (
        f"{len(hits)} engine-name literals outside the engine specs and the registry "
        f"(at most {MAX_HITS}); ask the spec instead:\n" + "\n".join(hits)
    )


def test_the_count_sees_a_literal_and_skips_the_declarations(tmp_path: Path) -> None:
    (tmp_path / "engines" / "specs").mkdir(parents=True)
    (tmp_path / "advise").mkdir()
    (tmp_path / "use.py").write_text('if engine == "vllm" or e in (\'sglang\', "x"):\n')
    (tmp_path / "engines" / "specs" / "vllm.py").write_text('NAME = "vllm"\n')
    (tmp_path / "engines" / "registry.py").write_text('NAMES = ("vllm",)\n')
    (tmp_path / "advise" / "rules.py").write_text('ENGINE = "vllm"\n')
    (tmp_path / "doc.py").write_text('"""vllm serve, not a literal; "vllm-loop" neither."""\n')
    assert engine_literals(tmp_path) == ['use.py:1:"vllm"', "use.py:1:'sglang'"]
