"""The advise code names no engine: what it knows of one is a trait (the engine's spec,
or ``advise/data/traits.yaml``), not an ``if engine == "...":`` branch."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from crossover.advise import traits
from crossover.advise.rules import ENGINES, all_rules
from crossover.engines import registry

ROOT = Path(__file__).parents[2]
SCOPE = [ROOT / "src/crossover/advise", ROOT / "src/crossover/cli/advise.py"]
#: a quoted engine name, as ``grep -rnoE "[\"'](vllm|...)[\"']"`` counts them
LITERAL = re.compile(r"[\"'](vllm|llamacpp|sglang|trtllm|transformers|triton|lmdeploy)[\"']")
#: the most left: heldout.py's exceptions are keyed by committed sweep targets' names
#: (("moe", "vllm"), ...), which are target names, not engine branches
MOST = 4


def _files() -> list[Path]:
    out: list[Path] = []
    for where in SCOPE:
        out += sorted(where.rglob("*.py")) if where.is_dir() else [where]
    return out


def literal_lines() -> list[str]:
    """``path:line: text`` of every line with a quoted engine name, once per name."""
    hits: list[str] = []
    for path in _files():
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            for m in LITERAL.finditer(line):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {m.group(0)} in {line.strip()}")
    return hits


def test_the_scope_is_the_advise_code() -> None:
    files = _files()
    assert ROOT / "src/crossover/cli/advise.py" in files
    assert ROOT / "src/crossover/advise/candidates.py" in files
    assert len(files) > 20


def test_the_pattern_finds_what_grep_finds() -> None:
    text = 'if engine == "llamacpp" or c.engine in (\'vllm\', "sglang"): "vllm-custom-allreduce"'
    assert [m.group(1) for m in LITERAL.finditer(text)] == ["llamacpp", "vllm", "sglang"]


def test_advise_names_at_most_four_engines_in_string_literals() -> None:
    hits = literal_lines()
    assert len(hits) <= MOST, "engine names in advise's code:\n" + "\n".join(hits)


def test_traits_name_registered_engines_and_known_rules() -> None:
    table = traits.table()
    assert set(table) <= set(registry.names())
    known = set(all_rules())
    for engine, t in table.items():
        ids = [
            t.pipeline_rule,
            t.multi_gpu_rule,
            t.cpu_moe_offload_rule,
            t.custom_allreduce_rule,
            *(
                x.rule
                for x in (t.pipeline_over_tcp, t.kv_budget_note, t.latency_note)
                if x is not None
            ),
            *(x.rule for x in (t.host_prompt_cache, t.slots) if x is not None),
        ]
        missing = {i for i in ids if i is not None} - known
        assert not missing, f"{engine}: rules not in rules.yaml: {missing}"


def test_a_custom_all_reduce_rule_goes_with_the_specs_sizes() -> None:
    for engine in ENGINES:
        if traits.of(engine).custom_allreduce_rule is not None:
            assert registry.get(engine).custom_allreduce_tps, engine


@pytest.mark.parametrize(
    ("given", "want"),
    [("llama.cpp", "llamacpp"), (" LLaMA.cpp ", "llamacpp"), ("TensorRT-LLM", "trtllm"),
     ("vLLM", "vllm"), ("nosuch", "nosuch")],
)  # fmt: skip
def test_canonical_engine_names(given: str, want: str) -> None:
    assert traits.canonical(given) == want


def test_layouts_and_defaults() -> None:
    layouts = {e: traits.of(e).layout for e in ENGINES}
    assert set(layouts.values()) == {"tensor", "layer-split", "single-device"}
    # the GGUF engine is the one that splits layers (its model is one file)
    assert {e for e, lay in layouts.items() if lay == "layer-split"} == {
        e for e in ENGINES if registry.get(e).reads_gguf
    }
    assert traits.of("no-such-engine") == traits.EngineTraits()
    assert traits.prose("no-such-engine") == "no-such-engine"
    assert traits.cpu_offload_engine() in ENGINES
