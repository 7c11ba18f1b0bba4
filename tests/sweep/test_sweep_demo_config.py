"""The demo's two configurations are what the README says was measured: the same model
and thread, one slot with whole-prompt prefill against eight slots prefilling in 2-token
micro-batches, measured interleaved (both engines up, each level's repeat on one then the
other); and the line that explains its crossover reads the measured figures."""

from __future__ import annotations

from pathlib import Path

from crossover.analysis.crossovers import Finding, LevelDiff
from crossover.analysis.stats import DiffInterval
from crossover.sweep.demo import DEMO_TARGETS, demo_config, demo_crossover, explain


def test_one_slot_against_eight_with_small_micro_batches_on_one_thread_each() -> None:
    cfg = demo_config(Path("/m/gemma.gguf"), Path("/b/llama-server"))
    one, eight = cfg.targets
    assert (one.name, eight.name) == DEMO_TARGETS == ("1-slot", "8-slots-ub2")
    assert one.launch is not None and eight.launch is not None
    assert (one.launch.parallel, eight.launch.parallel) == (1, 8)
    assert str(one.launch.model) == str(eight.launch.model) == "/m/gemma.gguf"
    # the single slot keeps llama-server's default batches: a prompt in one micro-batch
    assert one.launch.extra_args == ["--threads", "1"]
    args = list(eight.launch.extra_args or [])
    assert args[:2] == ["--threads", "1"]
    assert args[args.index("--ubatch-size") + 1] == "2"
    # a step holds every slot's decode token (fewer than the slots crashes llama-server)
    assert int(args[args.index("--batch-size") + 1]) >= eight.launch.parallel
    assert cfg.concurrency == [1, 2, 3] and cfg.repeats == 4 and cfg.interleave
    assert (cfg.input_tokens, cfg.output_tokens) == (128, 48)
    quick = demo_config(Path("/m/gemma.gguf"), Path("/b/llama-server"), quick=True)
    assert quick.concurrency == cfg.concurrency and quick.repeats == 1


def _level(c: float, one_ms: float, eight_ms: float) -> LevelDiff:
    d = one_ms - eight_ms
    iv = DiffInterval(d, d - 100.0, d + 100.0, "welch")
    lead = DEMO_TARGETS[0] if d < 0 else DEMO_TARGETS[1]
    return LevelDiff(c, iv, one_ms, eight_ms, 3, 3, lead)


def _finding(below: str, above: str, metric: str = "ttft_ms.p50") -> Finding:
    levels = (_level(1, 1060.0, 2090.0), _level(2, 2500.0, 2400.0), _level(8, 12600.0, 4100.0))
    return Finding(
        kind="crossover", metric=metric, a=DEMO_TARGETS[0], b=DEMO_TARGETS[1],
        levels=(1.0, 2.0, 8.0), below=below, above=above, concurrency=2.3,
        interval=(1.6, 3.1), per_level=levels,
    )  # fmt: skip


def test_the_explanation_quotes_both_ends_of_the_crossover() -> None:
    f = _finding(*DEMO_TARGETS)
    assert demo_crossover([f]) is f
    line = explain([f])
    assert line is not None and line.startswith("why: at 1 request 1-slot prefills")
    assert "(first token 1,060 ms against 2,090 ms)" in line
    assert "at 8 the single slot" in line and "(12,600 ms against 4,100 ms)" in line


def test_no_explanation_without_the_demos_crossover() -> None:
    reversed_ = _finding(DEMO_TARGETS[1], DEMO_TARGETS[0])
    other_metric = _finding(*DEMO_TARGETS, metric="total_tokens_per_s")
    assert explain([reversed_, other_metric]) is None
    assert explain([]) is None
