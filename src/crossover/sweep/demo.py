"""The embedded default of the main job: real llama.cpp serving a real model.

Two llama-server configurations of the real Gemma 3 270M (Q4_K_M GGUF assembled from
PyPI) that a user of a small CPU machine would weigh, both on one thread (the other core
is the client's):

* ``1-slot``: one slot, llama-server's default batches (a 128-token prompt goes through
  in one micro-batch);
* ``8-slots-ub2``: eight slots, each step up to 16 tokens (``--batch-size 16``: every
  slot's decode token fits, fewer than the slots crashes llama-server) in 2-token
  micro-batches (``--ubatch-size 2``).

One request at a time, the single slot prefills the prompt as one matrix product and
reaches the first token sooner: 2-token micro-batches make 64 passes over the weights
(measured on the 2-core machine: 1.5-2x longer to the first token; 8-token micro-batches
were only 1.3x, within the shared machine's spread). As requests pile up the single slot
serves them one after another, so a request's first token waits for the requests ahead to
finish their whole 48-token replies, while eight slots start each request at once and
prefill its prompt between the others' decode steps. The replies' length is what makes the
queue decide: with 32-token replies, 256-token prompts and one request per stream (all of
them in the first wave), eight slots prefilling four prompts at once in 2-token pieces
reached the first token later than the single slot's queue (8.0 s against 5.7 s at 4
requests). Two requests per stream let the later ones arrive spread out, as in steady
serving. The sweep finds where it flips, with an interval.

Both engines stay up and each level's repeat is measured on one, then the other
(``interleave``): on a shared 2-core machine the load drifts, and measured one target
after the other that drift decided the comparison. The earlier demo compared 1 slot with 8
slots prefilling in 8-token steps (``--batch-size 8``, 128-token prompts, 64 output tokens,
levels 1-8): the single slot's lead at one request (764 ms against 957) did not stand out of
the machine's run-to-run spread, and the demo ended with no crossover; it also took 13
minutes. Levels 1-3 and 48-token replies keep this one near 6.

transformers serve is left out of the CPU demo: it needs a PyTorch install
(several hundred MB) and Gemma as an HF folder, and would not fit the demo's few minutes
on 2 cores; the H200 results compare it (docs/results/h200/).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from crossover.analysis.crossovers import Finding
from crossover.sweep.config import SweepConfig, build_sweep_config

DEMO_LEVELS = [1, 2, 3]
#: the two configurations: one slot, whole-prompt prefill; eight slots, 2-token micro-batches
DEMO_TARGETS = ("1-slot", "8-slots-ub2")
DEMO_INPUT_TOKENS = 128
DEMO_OUTPUT_TOKENS = 48
#: the metric whose crossover the demo shows and explains
DEMO_METRIC = "ttft_ms.p50"
#: four: with three, the single slot's lead at one request (709 ms against 1,245, one of
#: the eight slots' runs at 966) was not significant on the shared machine
DEMO_REPEATS = 4


def demo_config(model: Path, server: Path, *, quick: bool = False) -> SweepConfig:
    # one thread leaves the other core to the client; llama.cpp's default on a busy
    # 2-core machine spins its threads against the client (seen: 20x slower tokens)
    launch = {
        "model": str(model),
        "context_tokens": 512,
        "executable": [str(server)],
    }
    one = ["--threads", "1"]
    return build_sweep_config(
        {
            "name": "demo-gemma3-270m-cpu",
            "concurrency": DEMO_LEVELS,
            "requests_per_concurrency": 2,
            "min_requests_per_level": 4,
            "warmup_requests": 1,
            "output_tokens": DEMO_OUTPUT_TOKENS,
            "input_tokens": DEMO_INPUT_TOKENS,
            "repeats": 1 if quick else DEMO_REPEATS,
            "interleave": True,
            "targets": [
                {
                    "name": DEMO_TARGETS[0],
                    "engine": "llamacpp",
                    "launch": {**launch, "parallel": 1, "extra_args": one},
                },
                {
                    "name": DEMO_TARGETS[1],
                    "engine": "llamacpp",
                    "launch": {
                        **launch,
                        "parallel": 8,
                        "extra_args": [*one, "--batch-size", "16", "--ubatch-size", "2"],
                    },
                },
            ],
        }
    )


def demo_crossover(findings: Sequence[Finding]) -> Finding | None:
    """The crossover the demo is about: TTFT p50, the single slot leading below it and
    the eight slots above; None when the sweep did not find it."""
    one, eight = DEMO_TARGETS
    for f in findings:
        if f.metric == DEMO_METRIC and f.kind == "crossover":
            if (f.below, f.above) == (one, eight):
                return f
    return None


def explain(findings: Sequence[Finding]) -> str | None:
    """One line on why the crossover falls where it does, with the figures measured at
    the lowest and highest level; None without the demo's crossover."""
    f = demo_crossover(findings)
    if f is None or not f.per_level:
        return None
    one, eight = DEMO_TARGETS

    def ms(level: int, name: str) -> str:
        d = f.per_level[level]
        return f"{(d.mean_a if name == f.a else d.mean_b):,.0f} ms"

    first, last = f.per_level[0], f.per_level[-1]
    return (
        f"why: at {first.concurrency:g} request {one} prefills the {DEMO_INPUT_TOKENS}-token "
        f"prompt in one batch and {eight} in 2-token pieces (first token {ms(0, one)} "
        f"against {ms(0, eight)}); at {last.concurrency:g} the single slot makes each request "
        f"wait for the whole replies ahead of it ({ms(-1, one)} against {ms(-1, eight)}), "
        "while eight slots start every request at once"
    )
