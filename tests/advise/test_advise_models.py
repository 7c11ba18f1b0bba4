"""Issue 39 item 6: the shapes people run now, held to their published parameter counts."""

from __future__ import annotations

from typing import Any

import pytest

from crossover.advise.model import _known, facts_from_config, load_model
from crossover.models.shapes import get_shape

PUBLISHED = {k: v for k, v in _known().items() if "published" in v}

NEW = [
    "gpt-oss-20b", "gpt-oss-120b", "qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b",
    "qwen3-14b", "qwen3-32b", "qwen3-235b-a22b", "llama-3.3-70b", "gemma-3-4b", "gemma-3-12b",
    "gemma-3-27b", "mistral-small-24b", "deepseek-v3",
]  # fmt: skip


def test_the_issue_models_are_known_with_sources_and_notes() -> None:
    assert set(NEW) <= set(PUBLISHED)
    for name in NEW:
        entry = PUBLISHED[name]
        assert (
            entry["source"].startswith("https://huggingface.co/")
            and "config.json" in entry["source"]
        )
        assert entry["published"]["source"]
        assert entry["notes"], name
        assert load_model(name).notes == entry["notes"]


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_params_within_two_percent_of_published(name: str) -> None:
    published: dict[str, Any] = PUBLISHED[name]["published"]
    facts = load_model(name)
    assert facts.params == pytest.approx(published["params"], rel=0.02)
    assert facts.published_params == published["params"]
    active = published.get("active")
    if active is not None:
        got = facts.active_params
        if "excludes the input embedding" in published["source"]:
            got -= facts.vocab * facts.hidden  # gpt-oss counts the lookup table as inactive
        assert got == pytest.approx(active, rel=0.02)


def test_deepseek_v3_kv_is_the_mla_latent() -> None:
    facts = load_model("deepseek-ai/DeepSeek-V3")
    # (kv_lora_rank 512 + qk_rope_head_dim 64) x 61 layers, not 2 x 128 heads x 128 x 61
    assert facts.kv_latent_dim == 576
    assert facts.kv_values_per_token() == 61 * 576
    assert facts.moe_layers == 58 and facts.shared_experts == 1
    assert facts.quantization is not None


def test_gpt_oss_is_mxfp4_moe_with_half_its_layers_windowed() -> None:
    facts = load_model("openai/gpt-oss-20b")
    assert facts.is_moe and facts.experts == 32 and facts.experts_per_token == 4
    assert facts.sliding_window == 128 and facts.sliding_layers == 12
    full = facts.kv_values_per_token()
    assert full == 2 * 24 * 8 * 64
    # at 8K context the 12 windowed layers hold 128 of 8192 tokens: about half the cache
    assert facts.kv_values_per_token(8192) == pytest.approx(full * (12 + 12 * 128 / 8192) / 24)
    assert facts.kv_values_per_token(64) == full  # shorter than the window: all of it


def test_gemma3_windows_five_layers_of_six() -> None:
    facts = load_model("gemma-3-27b")
    assert facts.sliding_window == 1024 and facts.sliding_layers == 62 - 62 // 6
    assert facts.kv_values_per_token(32768) < facts.kv_values_per_token() / 3


def test_qwen_sliding_window_off_means_none() -> None:
    base = {"hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
            "vocab_size": 100, "sliding_window": 4096}  # fmt: skip
    assert (
        facts_from_config(
            {**base, "use_sliding_window": False}, name="q", source="t"
        ).sliding_layers
        == 0
    )
    assert facts_from_config(base, name="m", source="t").sliding_layers == 4  # Mistral 7B v0.1


@pytest.mark.parametrize(("shape", "model"), [("qwen3-235b-a22b", "qwen3-235b-a22b"),
                                              ("llama-3.3-70b", "llama-3.3-70b")])  # fmt: skip
def test_synth_shapes_match_the_advisor_and_the_published_count(shape: str, model: str) -> None:
    arch, facts = get_shape(shape), load_model(model)
    assert arch.n_params() == pytest.approx(facts.params, rel=0.001)
    assert arch.n_params() == pytest.approx(PUBLISHED[model]["published"]["params"], rel=0.02)
    if arch.is_moe:
        assert arch.n_active_params() == pytest.approx(facts.active_params, rel=0.001)
