"""llama-server's default log says nothing of experts; verify-config reads the expert
counts from the GGUF the launch header names, when that file is on this machine."""

from __future__ import annotations

from pathlib import Path

from crossover.engines.effective import effective_settings
from crossover.engines.launchrec import LaunchRecord, header_line
from crossover.models.shapes import get_shape
from crossover.models.synth import ensure_synth

# the first lines of a real llama-server log at its default level (the H200 MoE sweep's)
LOG = """0.00.219.823 I srv  llama_server: initializing ...
0.06.556.062 I srv    load_model: initializing, n_slots = 4, n_ctx_slot = 512, kv_unified = 'false'
0.06.559.466 I srv  llama_server: model loaded
"""


def _log(model: Path) -> str:
    rec = LaunchRecord(
        engine="llamacpp",
        argv=["llama-server", "-m", str(model), "-np", "4"],
        env={},
        port=1,
        started_at="2026-12-02T00:00:00+00:00",
    )
    return header_line(rec) + "\n" + LOG


def test_expert_counts_come_from_the_model_file() -> None:
    gguf = ensure_synth("tiny-qwen3-moe", ("gguf",), "q8_0").gguf
    assert gguf is not None
    shape = get_shape("tiny-qwen3-moe")
    facts = effective_settings(_log(gguf), "llamacpp").facts
    assert facts["n_expert"].value == shape.experts
    assert facts["n_expert_used"].value == shape.experts_used
    assert facts["n_expert"].basis == "model-file"
    assert gguf.name in facts["n_expert"].evidence


def test_a_dense_model_or_a_missing_file_adds_nothing(tmp_path: Path) -> None:
    dense = ensure_synth("tiny-llama", ("gguf",), "q8_0").gguf
    assert dense is not None
    for model in (dense, tmp_path / "gone.gguf"):
        facts = effective_settings(_log(model), "llamacpp").facts
        assert "n_expert" not in facts and "n_expert_used" not in facts
