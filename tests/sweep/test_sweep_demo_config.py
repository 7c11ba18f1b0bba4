"""The demo's two configurations are what the README says was measured: the same model
and thread, one slot with whole-prompt prefill against eight with chunked prefill, measured
interleaved (both engines up, each level's repeat on one then the other)."""

from __future__ import annotations

from pathlib import Path

from crossover.sweep.demo import DEMO_TARGETS, demo_config


def test_one_slot_against_eight_chunked_on_one_thread_each() -> None:
    cfg = demo_config(Path("/m/gemma.gguf"), Path("/b/llama-server"))
    one, eight = cfg.targets
    assert (one.name, eight.name) == DEMO_TARGETS == ("1-slot", "8-slots-chunked")
    assert one.launch is not None and eight.launch is not None
    assert (one.launch.parallel, eight.launch.parallel) == (1, 8)
    assert str(one.launch.model) == str(eight.launch.model) == "/m/gemma.gguf"
    assert one.launch.extra_args == ["--threads", "1"]
    args = list(eight.launch.extra_args or [])
    assert args[:2] == ["--threads", "1"]
    assert args[args.index("--batch-size") + 1] == args[args.index("--ubatch-size") + 1] == "8"
    assert cfg.concurrency == [1, 2, 4, 8] and cfg.repeats == 3 and cfg.interleave
    quick = demo_config(Path("/m/gemma.gguf"), Path("/b/llama-server"), quick=True)
    assert quick.concurrency == [1, 2, 4] and quick.repeats == 1
